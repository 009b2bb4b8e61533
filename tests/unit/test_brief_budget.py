"""The brief's budget: which digests of its order it quotes, before any summary is read."""

from echo_memory.services.consolidation.brief import _fit


def _order(*sizes: int) -> list[dict[str, object]]:
    return [{"digest_id": f"d{i}", "token_count": size} for i, size in enumerate(sizes)]


def test_digests_are_taken_in_order_while_they_fit() -> None:
    assert _fit(_order(200, 300, 100), 600) == ["d0", "d1", "d2"]
    assert _fit(_order(200, 300, 100), 500) == ["d0", "d1"]


def test_a_digest_too_large_is_skipped_and_smaller_ones_after_it_still_fit() -> None:
    assert _fit(_order(500, 300, 100, 90), 450) == ["d1", "d2"]
    assert _fit(_order(700, 800), 600) == []
    assert _fit([], 600) == []
