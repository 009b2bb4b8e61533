"""trace_cause's `direction` on the causal service's real handler (one rolled-back transaction)."""

from __future__ import annotations

from typing import Any

import pytest

from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.testing.tiers import Handlers

# Deploy 7 → cache stampede → checkout outage → refund backlog, written as one agent would.
EPISODE = {
    "session_id": "s-direction",
    "entities": [{"name": "Deploy 7", "type": "release"}, {"name": "Cache stampede", "type": "incident"},
                 {"name": "Checkout outage", "type": "incident"}, {"name": "Refund backlog", "type": "problem"}],
    "facts": [
        {"source": "Deploy 7", "target": "Cache stampede", "relation": "triggered", "confidence": "extracted",
         "fact": "Deploy 7 led to a cache stampede.", "causal_hint": "led_to"},
        {"source": "Checkout outage", "target": "Cache stampede", "relation": "was caused by",
         "confidence": "extracted", "fact": "The checkout outage was caused by the cache stampede.",
         "causal_hint": "caused_by"},
        {"source": "Checkout outage", "target": "Refund backlog", "relation": "led to", "confidence": "extracted",
         "fact": "The checkout outage led to a refund backlog.", "causal_hint": "led_to"},
    ],
}


async def _trace(handlers: Handlers, **args: Any) -> dict[str, Any]:
    return await handlers.admin_call("causal", "trace_cause", args)


@pytest.fixture
async def written(handlers: Handlers) -> Handlers:
    assert (await handlers.admin_call("writes", "write_episode", EPISODE))["stored"]
    return handlers


@pytest.mark.parametrize(("direction", "entities", "opening"), [
    (None, ["Deploy 7", "Cache stampede", "Checkout outage", "Refund backlog"], "1 chain(s) through"),
    ("both", ["Deploy 7", "Cache stampede", "Checkout outage", "Refund backlog"], "1 chain(s) through"),
    ("causes", ["Deploy 7", "Cache stampede", "Checkout outage"], "1 chain(s) leading to"),
    ("effects", ["Checkout outage", "Refund backlog"], "1 chain(s) leading from"),
])
async def test_direction_keeps_the_causes_the_effects_or_both(
    written: Handlers, direction: str | None, entities: list[str], opening: str
) -> None:
    args = {"topic": "Checkout outage"} | ({"direction": direction} if direction else {})
    answer = await _trace(written, **args)
    assert [c["entities"] for c in answer["chains"]] == [entities]
    assert answer["direction"] == (direction or "both")
    assert answer["message"].startswith(opening)


async def test_no_chain_in_the_direction_asked_says_which_direction(written: Handlers) -> None:
    answer = await _trace(written, topic="Deploy 7", direction="causes")
    assert answer["chains"] == [] and answer["empty_kind"] == "no_chain_connects"
    assert "in direction 'causes'" in answer["message"]
    assert [c["entities"][0] for c in (await _trace(written, topic="Deploy 7", direction="effects"))["chains"]] == [
        "Deploy 7"]


async def test_an_unknown_direction_is_invalid_argument(written: Handlers) -> None:
    with pytest.raises(InvalidArgument, match="direction"):
        await _trace(written, topic="Deploy 7", direction="upstream")


async def test_direction_applies_to_every_entity_of_the_topic(written: Handlers) -> None:
    causes = await _trace(written, topic="Deploy 7, Refund backlog", direction="causes")
    assert [c["entities"] for c in causes["chains"]] == [["Deploy 7", "Cache stampede", "Checkout outage", "Refund backlog"]]
    effects = await _trace(written, topic="Deploy 7, Refund backlog", direction="effects")
    assert [c["entities"] for c in effects["chains"]] == [["Deploy 7", "Cache stampede", "Checkout outage", "Refund backlog"]]
    cache = await _trace(written, topic="Cache stampede, Refund backlog", direction="effects")
    assert [c["entities"] for c in cache["chains"]] == [["Cache stampede", "Checkout outage", "Refund backlog"]]
