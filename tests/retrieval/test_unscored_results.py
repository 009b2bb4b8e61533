"""query_memory's `about` and `digest` without a query: results say they were not scored, never `score: 0`."""

from __future__ import annotations

import pytest

from echo_memory.libs.core.contracts.framing import render_recall
from echo_memory.libs.core.contracts.query import QueryMemoryResult
from echo_memory.libs.testing.tiers import Handlers

EPISODE = {
    "session_id": "s-unscored",
    "entities": [{"name": "Billing API", "type": "service"}, {"name": "Postgres", "type": "database"},
                 {"name": "Stripe", "type": "vendor"}],
    "facts": [
        {"source": "Billing API", "target": "Postgres", "relation": "stores invoices in", "confidence": "extracted",
         "fact": "The billing API stores invoices in Postgres."},
        {"source": "Billing API", "target": "Stripe", "relation": "charges cards through", "confidence": "extracted",
         "fact": "The billing API charges cards through Stripe."},
    ],
}


@pytest.fixture
async def written(handlers: Handlers) -> Handlers:
    assert (await handlers.admin_call("writes", "write_episode", EPISODE))["stored"]
    return handlers


@pytest.mark.parametrize(("args", "how"), [
    ({"about": ["Billing API"]}, "about without a query"),
    ({"digest": True}, "digest"),
])
async def test_results_without_a_query_are_not_scored_and_say_so(written: Handlers, args: dict[str, object], how: str) -> None:
    raw = await written.admin_call("retrieval", "query_memory", args)
    result = QueryMemoryResult.model_validate(raw)
    assert len(result.results) == 2
    assert [item.score for item in result.results] == [None, None]
    assert result.note is not None and f"not scored ({how})" in result.note
    text = render_recall(raw)
    assert "not scored]" in text and "score=" not in text


async def test_about_with_a_query_is_scored_best_first(written: Handlers) -> None:
    result = QueryMemoryResult.model_validate(await written.admin_call(
        "retrieval", "query_memory", {"about": ["Billing API"], "query": "which payment provider charges cards?"}))
    scores = [item.score for item in result.results]
    assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True), scores  # type: ignore[type-var]
    assert "Stripe" in result.results[0].text
    assert "not scored" not in (result.note or "")
