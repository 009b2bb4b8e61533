"""Every outcome of write_episode as the edge returns it: the same keys, honest about what was stored (handler tier)."""

from __future__ import annotations

import pytest

from echo_memory.libs.local.stack import tool_error
from echo_memory.libs.testing.agents import Agent
from echo_memory.libs.testing.tiers import Handlers
from tests.writes.conftest import PAYMENTS, RESULT_KEYS, call, counts, episode, fact, sql

POSTGRES = episode(
    [("PostgreSQL", "database"), ("Billing app", "service")],
    [fact("Billing app", "PostgreSQL", "stores invoices in", "The billing app stores invoices in PostgreSQL.")],
)


async def test_stored_creates_entities_fact_audit_and_event_together(handlers: Handlers) -> None:
    client = Agent(handlers, "claude-code")
    is_error, result = await call(client, "write_episode", PAYMENTS)
    assert not is_error
    assert set(result) == RESULT_KEYS
    assert result["stored"] is True and result["not_stored"] is None and result["partial"] is False
    assert result["error"] is None and result["deferred"] == [] and result["restated"] == []
    [edge] = result["edges_created"]
    assert (edge["source"], edge["target"], edge["relation"]) == ("Payments service", "Stripe", "charges cards through")
    assert edge["supersedes"] is None
    assert await counts(handlers.conn) == {
        "entities": 2, "entity_aliases": 0, "episodes": 1, "facts": 1, "audit_log": 3, "outbox": 1,
        "idempotency": 0, "recall_saves": 0, "documents": 0, "document_ingestions": 0,
    }
    kinds = await sql(handlers.conn, "SELECT kind, agent_id FROM audit_log ORDER BY id")
    assert kinds == [("entity_created", "claude-code"), ("entity_created", "claude-code"), ("fact_created", "claude-code")]
    [(kind, payload)] = await sql(handlers.conn, "SELECT kind, payload FROM outbox")
    assert kind == "fact.created" and payload["fact_id"] == edge["fact_id"] and payload["org"] == handlers.org


async def test_restating_the_active_edge_is_unchanged_with_no_new_rows(handlers: Handlers) -> None:
    client = Agent(handlers, "claude-code")
    _, first = await call(client, "write_episode", PAYMENTS)
    before = await counts(handlers.conn)
    is_error, again = await call(client, "write_episode", {**PAYMENTS, "session_id": "s-2"})
    assert not is_error
    assert set(again) == RESULT_KEYS
    assert again["stored"] is False and again["not_stored"] == "unchanged" and again["edges_created"] == []
    assert [r["fact_id"] for r in again["restated"]] == [first["edges_created"][0]["fact_id"]]
    assert await counts(handlers.conn) == before  # no episode, no audit churn, no event


async def test_a_near_match_is_deferred_with_candidates_and_stores_nothing(handlers: Handlers) -> None:
    client = Agent(handlers, "cursor")
    _, first = await call(client, "write_episode", POSTGRES)
    before = await counts(handlers.conn)
    variant = episode(
        [("Postgres", "database"), ("Search service", "service")],
        [fact("Search service", "Postgres", "indexes", "The search service indexes rows from Postgres.")],
    )
    is_error, deferred = await call(client, "write_episode", variant)
    assert not is_error  # a deferral is not an error, and not a success either
    assert set(deferred) == RESULT_KEYS
    assert deferred["stored"] is False and deferred["not_stored"] == "deferred" and deferred["edges_created"] == []
    [mention] = deferred["deferred"]
    assert mention["mention"] == "Postgres"
    [candidate] = [c for c in mention["candidates"] if c["name"] == "PostgreSQL"]
    [(pg_id,)] = await sql(handlers.conn, "SELECT id::text FROM entities WHERE name = 'PostgreSQL'")
    assert candidate["entity_id"] == pg_id and 0.81 <= candidate["similarity"] <= 1.0
    assert await counts(handlers.conn) == before  # not even "Search service" was created
    assert first["stored"] is True


async def test_partial_stores_what_does_not_wait_on_a_deferred_mention(handlers: Handlers) -> None:
    client = Agent(handlers, "cursor")
    await call(client, "write_episode", POSTGRES)
    mixed = episode(
        [("Postgres", "database"), ("Search service", "service"), ("Redis", "cache")],
        [
            fact("Search service", "Postgres", "indexes", "The search service indexes rows from Postgres."),
            fact("Search service", "Redis", "caches results in", "The search service caches results in Redis."),
        ],
    )
    is_error, result = await call(client, "write_episode", mixed)
    assert not is_error
    assert result["stored"] is True and result["partial"] is True and result["not_stored"] is None
    assert [e["target"] for e in result["edges_created"]] == ["Redis"]
    assert [d["mention"] for d in result["deferred"]] == ["Postgres"]
    names = {r[0] for r in await sql(handlers.conn, "SELECT name FROM entities")}
    assert names == {"PostgreSQL", "Billing app", "Search service", "Redis"}  # no "Postgres" node


async def test_no_facts_stores_nothing_even_with_entities(handlers: Handlers) -> None:
    client = Agent(handlers, "codex")
    is_error, result = await call(client, "write_episode", episode([("Lonely", "thing")], []))
    _, in_solo = await call(client, "write_episode", episode([("Lonely", "thing")], [], scope="solo"))
    assert not is_error
    assert set(result) == RESULT_KEYS
    assert result["stored"] is False and result["not_stored"] == "no_facts" and result["scope"] == "shared"
    assert in_solo["not_stored"] == "no_facts" and in_solo["scope"] == "solo"
    assert sum((await counts(handlers.conn)).values()) == 0
    assert await sql(handlers.conn, "SELECT name FROM scopes") == [("shared",)]  # not even a solo scope row


REFUSALS = [
    ("bad argument", {**PAYMENTS, "colour": "blue"}, "invalid_argument", "colour"),
    ("secret", episode([("CI", "system"), ("AWS", "vendor")],
                       [fact("CI", "AWS", "deploys with", "CI deploys with AKIA" + "Q3ZK7T2MWX4HB6PN")]),
     "invalid_argument", "an AWS access key"),
    ("source not among entities", episode([("A", "x")], [fact("A", "B", "knows", "A knows B.")]), "invalid_argument",
     "target 'B' is not among this call's entities"),
    ("unknown scope", {**PAYMENTS, "scope": "nope"}, "not_found", "scope 'nope' does not exist"),
    ("scope not granted", {**PAYMENTS, "scope": "team-a"}, "scope_denied", "may not write scope 'team-a'"),
    ("unknown entity id", {**PAYMENTS, "entity_resolutions": [
        {"mention": "Stripe", "entity_id": "00000000-0000-0000-0000-000000000001"}]}, "not_found",
     "does not exist in scope 'shared'"),
]


@pytest.mark.parametrize("reason, arguments, code, fragment", REFUSALS, ids=[r[0] for r in REFUSALS])
async def test_each_refusal_has_the_full_shape_and_a_typed_error(
    handlers: Handlers, reason: str, arguments: dict, code: str, fragment: str
) -> None:
    # The token grants "nope", so the refusal comes from the scope itself, not the grant.
    client = Agent(handlers, "codex", write=["shared", "solo", "nope"])
    is_error, result = await call(client, "write_episode", arguments)
    assert is_error, reason
    assert set(result) == RESULT_KEYS
    assert result["stored"] is False and result["not_stored"] == "refused" and result["retryable"] is False
    assert result["error"]["code"] == code and result["error"]["retryable"] is False
    assert fragment in result["error"]["message"]
    assert sum((await counts(handlers.conn)).values()) == 0


async def test_a_secret_is_named_by_kind_and_never_echoed(handlers: Handlers) -> None:
    secret = "ghp_" + "Zz9" * 12
    client = Agent(handlers, "codex")
    result = await client.call_tool("write_episode", episode(
        [("Bot", "agent"), ("GitHub", "vendor")], [fact("Bot", "GitHub", "authenticates to", f"Bot uses {secret}.")]))
    assert result.is_error
    assert "a GitHub token" in tool_error(result)["message"]
    assert secret not in str(result.structured_content) and secret not in result.content[0].text
