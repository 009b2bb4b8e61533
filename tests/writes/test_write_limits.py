"""Limits and bad input: each refused with a clear, typed error, as the edge returns it, changing nothing (handler tier)."""

from __future__ import annotations

from typing import Any

from echo_memory.libs.testing.agents import Agent
from echo_memory.libs.testing.tiers import Handlers
from tests.writes.conftest import PAYMENTS, RESULT_KEYS, call, counts, episode, fact, sql

ONE = PAYMENTS["facts"][0]


def _many_entities(n: int) -> dict[str, Any]:
    return episode([(f"Entity {i}", "thing") for i in range(n)], [fact("Entity 0", "Entity 1", "r", "Entity 0 r Entity 1.")])


def _many_facts(n: int) -> dict[str, Any]:
    return episode([("A", "x"), ("B", "x")], [fact("A", "B", f"rel {i}", f"A rel {i} B.") for i in range(n)])


CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("too many entities", _many_entities(51), "invalid_argument", "entities"),
    ("too many facts", _many_facts(51), "invalid_argument", "facts"),
    ("fact too long", {**PAYMENTS, "facts": [{**ONE, "fact": "x" * 2001}]}, "invalid_argument", "facts.0.fact"),
    ("name too long", episode([("N" * 201, "x"), ("B", "x")], [fact("N" * 201, "B", "r", "t")]), "invalid_argument",
     "entities.0.name"),
    ("too many aliases", episode([{"name": "A", "type": "x", "aliases": [f"a{i}" for i in range(21)]}, ("B", "x")],
                                 [fact("A", "B", "r", "t")]), "invalid_argument", "aliases"),
    ("unknown top-level field", {**PAYMENTS, "agent_id": "someone-else"}, "invalid_argument", "agent_id"),
    ("unknown fact field", {**PAYMENTS, "facts": [{**ONE, "weight": 3}]}, "invalid_argument", "facts.0.weight"),
    ("facts of the wrong type", {**PAYMENTS, "facts": "Stripe is used"}, "invalid_argument", "facts"),
    ("entity of the wrong type", {**PAYMENTS, "entities": ["Stripe"]}, "invalid_argument", "entities.0"),
    ("confidence outside the enum", {**PAYMENTS, "facts": [{**ONE, "confidence": "certain"}]}, "invalid_argument",
     "confidence"),
    ("causal hint outside the enum", {**PAYMENTS, "facts": [{**ONE, "causal_hint": "because"}]}, "invalid_argument",
     "causal_hint"),
    ("missing session", {k: v for k, v in PAYMENTS.items() if k != "session_id"}, "invalid_argument", "session_id"),
    ("blank fact", {**PAYMENTS, "facts": [{**ONE, "fact": "   "}]}, "invalid_argument", "facts.0.fact"),
    ("NUL character", {**PAYMENTS, "facts": [{**ONE, "fact": "a\x00b"}]}, "invalid_argument", "NUL"),
    ("source not among entities", {**PAYMENTS, "facts": [{**ONE, "source": "Adyen"}]}, "invalid_argument",
     "source 'Adyen' is not among this call's entities"),
    ("two claims on one edge", {**PAYMENTS, "facts": [ONE, {**ONE, "fact": "Other text.", "relation": "CHARGES cards through"}]},
     "invalid_argument", "one claim per edge"),
    ("entity id that is not an id", {**PAYMENTS, "entity_resolutions": [{"mention": "Stripe", "entity_id": "stripe-1"}]},
     "invalid_argument", "not an entity id"),
    ("two resolutions for one mention", {**PAYMENTS, "entity_resolutions": [
        {"mention": "Stripe", "entity_id": "new"},
        {"mention": "stripe", "entity_id": "00000000-0000-0000-0000-000000000001"}]},
     "invalid_argument", "two different resolutions"),
    ("solo: prefix is not a scope name", {**PAYMENTS, "scope": "solo:claude-code"}, "invalid_argument", "not a valid scope"),
    ("unknown scope", {**PAYMENTS, "scope": "ghost"}, "not_found", "scope 'ghost' does not exist"),
    ("scope the token does not grant", {**PAYMENTS, "scope": "ops"}, "scope_denied", "may not write scope 'ops'"),
    ("scope whose writers exclude the agent", {**PAYMENTS, "scope": "locked"}, "scope_denied",
     "not among the writers of scope 'locked'"),
]


async def test_every_limit_and_bad_input_is_refused_typed_and_changes_nothing(handlers: Handlers) -> None:
    await handlers.admin_call("writes", "scope_create", {"name": "ops"})
    await handlers.admin_call("writes", "scope_create", {"name": "locked"})
    await sql(handlers.conn, "UPDATE scopes SET writers = ARRAY['ops-bot'] WHERE name = 'locked'")
    problems = []
    client = Agent(handlers, "claude-code", write=["shared", "solo", "ghost", "locked"])
    for name, arguments, code, fragment in CASES:
        is_error, result = await call(client, "write_episode", arguments)
        error = result.get("error") or {}
        if not (is_error and set(result) == RESULT_KEYS and result["not_stored"] == "refused"
                and error.get("code") == code and error.get("retryable") is False
                and fragment in error.get("message", "")):
            problems.append((name, result))
    assert problems == []
    assert sum((await counts(handlers.conn)).values()) == 0


async def test_the_largest_call_within_limits_is_stored(handlers: Handlers) -> None:
    arguments = episode(
        [(f"Entity {i}", "thing") for i in range(50)],
        [fact(f"Entity {i}", f"Entity {i + 1}", "precedes", f"Entity {i} precedes entity {i + 1}. " + "x" * 1900)
         for i in range(49)] + [fact("Entity 49", "Entity 0", "precedes", "Entity 49 wraps around to entity 0.")],
    )
    client = Agent(handlers, "claude-code")
    is_error, result = await call(client, "write_episode", arguments)
    assert not is_error and result["stored"] is True and len(result["edges_created"]) == 50
    found = await counts(handlers.conn)
    assert (found["entities"], found["facts"], found["outbox"]) == (50, 50, 50)
