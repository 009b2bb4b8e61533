"""The brief's budget: which digests of its order it quotes, before any summary is read."""

from echo_memory.services.consolidation.brief import MAX_CANDIDATES, SMALLEST_DIGEST_TOKENS, _fit, candidates


def _order(*sizes: int) -> list[dict[str, object]]:
    return [{"digest_id": f"d{i}", "token_count": size} for i, size in enumerate(sizes)]


def test_digests_are_taken_in_order_while_they_fit() -> None:
    assert _fit(_order(200, 300, 100), 600) == ["d0", "d1", "d2"]
    assert _fit(_order(200, 300, 100), 500) == ["d0", "d1"]


def test_a_digest_too_large_is_skipped_and_smaller_ones_after_it_still_fit() -> None:
    assert _fit(_order(500, 300, 100, 90), 450) == ["d1", "d2"]
    assert _fit(_order(700, 800), 600) == []
    assert _fit([], 600) == []


def test_the_digests_read_hold_all_the_budget_could_quote_and_stop_at_the_cap() -> None:
    for budget in (50, 600, 2000):
        assert candidates(budget) > budget // SMALLEST_DIGEST_TOKENS
    assert candidates(600) < candidates(2000) < MAX_CANDIDATES
    assert candidates(8000) == MAX_CANDIDATES
