"""The demotion of instruction-like items (services/retrieval/demotion.py), on any ranking."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from echo_memory.services.retrieval.demotion import FLAGGED_MARGIN, demote_flagged

Item = tuple[str, float]

rankings = st.lists(st.one_of(st.floats(min_value=-1, max_value=1), st.just(float("nan"))), max_size=30).map(
    lambda cosines: [(f"id-{i}", c) for i, c in enumerate(cosines)]
)


def _key(item: Item) -> Item:
    return item


@given(rankings, st.data())
def test_unflagged_items_keep_their_order_and_nothing_is_lost(ranked: list[Item], data: st.DataObject) -> None:
    flagged = set(data.draw(st.sets(st.sampled_from([i for i, _ in ranked])) if ranked else st.just(set())))
    out = demote_flagged(ranked, flagged, _key)
    assert sorted(out) == sorted(ranked)
    assert [i for i in out if i[0] not in flagged] == [i for i in ranked if i[0] not in flagged]
    assert [i for i in out if i[0] in flagged] == [i for i in ranked if i[0] in flagged]
    for item in out:  # a flagged item never rises
        if item[0] in flagged:
            assert out.index(item) >= ranked.index(item)


@given(rankings)
def test_a_ranking_without_flagged_items_is_returned_exactly(ranked: list[Item]) -> None:
    assert demote_flagged(ranked, set(), _key) == ranked
    assert demote_flagged(ranked, {"not-there"}, _key) == ranked


def test_a_flagged_item_goes_below_comparable_unflagged_ones_only() -> None:
    ranked = [("flagged", 0.80), ("close", 0.80 - FLAGGED_MARGIN / 2), ("far", 0.40), ("also-close", 0.75)]
    assert [i for i, _ in demote_flagged(ranked, {"flagged"}, _key)] == ["close", "far", "also-close", "flagged"]
    ranked = [("flagged", 0.80), ("far", 0.40), ("farther", 0.30)]
    assert demote_flagged(ranked, {"flagged"}, _key) == ranked  # far more relevant than the rest: stays first
