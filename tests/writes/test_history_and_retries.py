"""Supersession chains read back through history, and retries that store nothing twice.

On the handler tier, except reading history as of each version's second and parallel retries: those
need each request committing at its own time on its own connection (every service's routes on the
in-memory broker).
"""

from __future__ import annotations

import asyncio
import time

from echo_memory.libs.testing.agents import Agent, Routes
from echo_memory.libs.testing.tiers import Handlers
from tests.writes.conftest import PAYMENTS, Bus, call, counts, episode, fact, sql

VERSIONS = [
    ("The payments service charges cards through Stripe.", "extracted", None),
    ("The payments service charges cards through Stripe, with Adyen as a fallback.", "extracted", None),
    ("The payments service charges cards through Stripe only for EU customers.", "inferred", "contradicts"),
]


def _version(text: str, confidence: str, hint: str | None) -> dict:
    extra = {"causal_hint": hint} if hint else {}
    return episode([("Payments service", "service"), ("Stripe", "vendor")],
                   [fact("Payments service", "Stripe", "charges cards through", text, confidence, **extra)])


async def test_three_versions_form_one_chain_readable_as_of_each_time(routes: Routes) -> None:
    seen_at: list[int] = []
    ids: list[str] = []
    client = Agent(routes, "claude-code")
    for text, confidence, hint in VERSIONS:
        _, result = await call(client, "write_episode", _version(text, confidence, hint))
        assert result["stored"] is True, result
        [edge] = result["edges_created"]
        assert edge["supersedes"] == (ids[-1] if ids else None)
        ids.append(edge["fact_id"])
        seen_at.append(int(time.time()))  # as_of a whole second reads its end: this write is in
        await asyncio.sleep(1.1)  # the next version lands in a later second
    history = []
    for moment in seen_at:
        _, read = await call(client, "query_memory", {"about": ["Payments service", "Stripe"], "as_of": moment})
        history.append([(r["id"], r["text"]) for r in read["results"]])
    assert history == [[(fact_id, text)] for fact_id, (text, _, _) in zip(ids, VERSIONS, strict=True)]

    rows = await sql(routes.database_url, "SELECT id::text, supersedes::text, t_valid, t_invalid FROM facts ORDER BY t_valid")
    assert [r[0] for r in rows] == ids
    assert [r[1] for r in rows] == [None, ids[0], ids[1]]
    assert rows[0][3] == rows[1][2] and rows[1][3] == rows[2][2] and rows[2][3] is None  # no gap, no overlap
    audits = await sql(routes.database_url, "SELECT before->>'fact_id', after->>'fact_id', before->>'text', after->>'text' "
                                           "FROM audit_log WHERE kind = 'fact_superseded' ORDER BY id")
    assert audits == [(ids[0], ids[1], VERSIONS[0][0], VERSIONS[1][0]), (ids[1], ids[2], VERSIONS[1][0], VERSIONS[2][0])]
    events = await sql(routes.database_url, "SELECT kind, payload->>'supersedes' FROM outbox ORDER BY id")
    assert events == [("fact.created", None), ("fact.superseded", ids[0]), ("fact.superseded", ids[1])]


async def test_a_changed_confidence_or_hint_is_a_new_version_but_the_same_claim_is_not(handlers: Handlers) -> None:
    text = VERSIONS[0][0]
    client = Agent(handlers, "claude-code")
    outcomes = []
    for confidence, hint in [("extracted", None), ("extracted", None), ("inferred", None), ("inferred", "led_to"),
                             ("inferred", "led_to")]:
        _, result = await call(client, "write_episode", _version(text, confidence, hint))
        outcomes.append(result["not_stored"] or "stored")
    assert outcomes == ["stored", "unchanged", "stored", "stored", "unchanged"]
    assert (await sql(handlers.conn, "SELECT count(*) FROM facts WHERE t_invalid IS NULL"))[0][0] == 1


async def test_an_idempotency_key_returns_the_first_response_and_stores_nothing_again(handlers: Handlers) -> None:
    keyed = {**PAYMENTS, "idempotency_key": "turn-42"}
    client = Agent(handlers, "claude-code")
    _, first = await call(client, "write_episode", keyed)
    after_first = await counts(handlers.conn)
    _, again = await call(client, "write_episode", keyed)
    is_error, misuse = await call(client, "write_episode", {**keyed, "session_id": "another"})
    assert first["stored"] is True
    assert again == first  # the first response, not "unchanged"
    assert await counts(handlers.conn) == after_first
    assert after_first["idempotency"] == 1
    assert is_error and misuse["error"]["code"] == "invalid_argument"
    assert "was first used with different arguments" in misuse["error"]["message"]


async def test_keys_belong_to_the_agent(handlers: Handlers) -> None:
    keyed = {**PAYMENTS, "idempotency_key": "k-1"}
    one = Agent(handlers, "claude-code")
    two = Agent(handlers, "cursor")
    _, first = await call(one, "write_episode", keyed)
    _, second = await call(two, "write_episode", {**keyed, "session_id": "other"})
    assert first["stored"] is True
    assert second["not_stored"] == "unchanged"  # evaluated on its own: a restatement, not cursor's replay


async def test_a_deferral_is_not_remembered_so_the_follow_up_may_reuse_the_key(handlers: Handlers) -> None:
    client = Agent(handlers, "cursor")
    _, base = await call(client, "write_episode", episode(
        [("PostgreSQL", "database"), ("Billing app", "service")],
        [fact("Billing app", "PostgreSQL", "stores invoices in", "The billing app stores invoices in PostgreSQL.")]))
    variant = {**episode([("Postgres", "database"), ("Search", "service")],
                         [fact("Search", "Postgres", "indexes", "Search indexes Postgres.")]), "idempotency_key": "t-7"}
    _, deferred = await call(client, "write_episode", variant)
    choice = deferred["deferred"][0]["candidates"][0]["entity_id"]
    _, resolved = await call(client, "write_episode", {
        **variant, "entity_resolutions": [{"mention": "Postgres", "entity_id": choice}]})
    assert deferred["not_stored"] == "deferred"
    assert resolved["stored"] is True


async def test_parallel_retries_of_one_key_store_once_and_answer_alike(routes: Routes) -> None:
    bus = Bus(routes.client, routes.org)
    keyed = {**PAYMENTS, "idempotency_key": "burst"}
    results = await asyncio.gather(*(bus.write(keyed) for _ in range(8)))
    assert all(r == results[0] for r in results), results
    assert results[0]["stored"] is True
    assert (await counts(routes.database_url))["facts"] == 1


async def test_a_causal_hint_added_later_is_a_new_version_audited_as_post_hoc(handlers: Handlers) -> None:
    plain = episode([("Deploy freeze", "decision"), ("Outage", "incident")],
                    [fact("Deploy freeze", "Outage", "followed", "The deploy freeze followed the outage.")])
    hinted = episode([("Deploy freeze", "decision"), ("Outage", "incident")],
                     [fact("Deploy freeze", "Outage", "followed", "The deploy freeze followed the outage.",
                           causal_hint="caused_by")])
    client = Agent(handlers, "claude-code")
    _, first = await call(client, "write_episode", plain)
    _, second = await call(client, "write_episode", hinted)
    _, again = await call(client, "write_episode", hinted)
    [old] = first["edges_created"]
    [new] = second["edges_created"]
    assert new["supersedes"] == old["fact_id"]
    assert again["not_stored"] == "unchanged"  # restating the hinted claim stores nothing
    rows = await sql(handlers.conn, "SELECT kind, post_hoc, before->>'fact_id', after->>'causal_hint' "
                                         "FROM audit_log WHERE fact_id = %s", (new["fact_id"],))
    assert rows == [("causal_hint_added", True, old["fact_id"], "caused_by")]
    origin = await sql(handlers.conn, "SELECT hint_origin FROM facts WHERE id = %s", (new["fact_id"],))
    assert origin == [("post_hoc",)]


async def test_a_retry_without_a_key_after_declaring_an_entity_new_answers_unchanged(handlers: Handlers) -> None:
    """The retry of a call that created an entity it declared new restates it: safe, nothing stored twice."""
    declared = {**episode([("Ledger v2", "service"), ("Payments service", "service")],
                          [fact("Payments service", "Ledger v2", "writes to", "Payments writes to Ledger v2.")]),
                "entity_resolutions": [{"mention": "Ledger v2", "entity_id": "new", "rationale": "a new ledger"}]}
    client = Agent(handlers, "claude-code")
    _, first = await call(client, "write_episode", declared)
    after_first = await counts(handlers.conn)
    is_error, retry = await call(client, "write_episode", declared)
    changed = {**declared, "facts": [fact("Payments service", "Ledger v2", "writes to",
                                          "Payments writes every refund to Ledger v2.")]}
    refused, conflict = await call(client, "write_episode", changed)
    assert first["stored"] is True
    assert not is_error and retry["stored"] is False and retry["not_stored"] == "unchanged", retry
    assert [r["fact_id"] for r in retry["restated"]] == [e["fact_id"] for e in first["edges_created"]]
    assert await counts(handlers.conn) == after_first
    # A real change under the same "new" claim is still refused: the name belongs to an entity now.
    assert refused and conflict["error"]["code"] == "invalid_argument" and "already has that name" in conflict["error"]["message"]
