"""Entity resolution: exact and alias matches resolve silently (audited), never by substring;
agent confirmations must name an entity of the same scope; mentions of one entity are one entity."""

from __future__ import annotations

import psycopg

from echo_memory.libs.testing.agents import Agent
from echo_memory.libs.testing.tiers import Handlers
from tests.writes.conftest import PAYMENTS, call, counts, episode, fact, sql


async def _resolutions(url: str | psycopg.AsyncConnection) -> list[tuple[str, str, str]]:
    rows = await sql(url, "SELECT after->>'mention', after->>'entity', after->>'how' FROM audit_log "
                          "WHERE kind = 'entity_resolved' ORDER BY id")
    return [tuple(r) for r in rows]  # type: ignore[misc]


async def test_exact_case_insensitive_and_alias_matches_resolve_silently_and_are_audited(handlers: Handlers) -> None:
    first = episode(
        [{"name": "PostgreSQL", "type": "database", "aliases": ["pg"]}, ("Billing app", "service")],
        [fact("Billing app", "PostgreSQL", "stores invoices in", "The billing app stores invoices in PostgreSQL.")],
    )
    by_case = episode(
        [("postgresql", "database"), ("  BILLING app ", "service")],
        [fact("BILLING app", "postgresql", "backs up to", "The billing app backs up to PostgreSQL nightly.")],
    )
    by_alias = episode(
        [("PG", "database"), ("Reports job", "job")],
        [fact("Reports job", "PG", "reads from", "The reports job reads from the pg replica.")],
    )
    client = Agent(handlers, "claude-code")
    await call(client, "write_episode", first)
    _, second = await call(client, "write_episode", by_case)
    _, third = await call(client, "write_episode", by_alias)
    assert second["stored"] and third["stored"]
    # Responses name the stored entity, not the mention.
    assert (second["edges_created"][0]["source"], second["edges_created"][0]["target"]) == ("Billing app", "PostgreSQL")
    assert third["edges_created"][0]["target"] == "PostgreSQL"
    names = sorted(r[0] for r in await sql(handlers.conn, "SELECT name FROM entities"))
    assert names == ["Billing app", "PostgreSQL", "Reports job"]
    assert await _resolutions(handlers.conn) == [
        ("BILLING app", "Billing app", "exact"),
        ("postgresql", "PostgreSQL", "exact"),
        ("PG", "PostgreSQL", "alias"),
    ]


async def test_a_substring_never_resolves_silently(handlers: Handlers) -> None:
    client = Agent(handlers, "claude-code")
    await call(client, "write_episode", PAYMENTS)
    _, result = await call(client, "write_episode", episode(
        [("Payments", "team"), ("Finance", "department")],
        [fact("Payments", "Finance", "reports to", "The payments team reports to finance.")],
    ))
    [(payments_id,)] = await sql(handlers.conn, "SELECT id::text FROM entities WHERE name = 'Payments service'")
    if result["stored"]:
        assert result["edges_created"][0]["source"] == "Payments"  # a new node, not "Payments service"
        assert await _resolutions(handlers.conn) == []
    else:
        assert result["not_stored"] == "deferred"  # asked, never merged
        assert result["deferred"][0]["candidates"][0]["entity_id"] == payments_id


async def test_agent_confirmation_resolves_learns_the_alias_and_is_audited(handlers: Handlers) -> None:
    variant = episode(
        [("Postgres", "database"), ("Search service", "service")],
        [fact("Search service", "Postgres", "indexes", "The search service indexes rows from Postgres.")],
    )
    client = Agent(handlers, "cursor")
    await call(client, "write_episode", episode(
        [("PostgreSQL", "database"), ("Billing app", "service")],
        [fact("Billing app", "PostgreSQL", "stores invoices in", "The billing app stores invoices in PostgreSQL.")]))
    _, deferred = await call(client, "write_episode", variant)
    candidate = deferred["deferred"][0]["candidates"][0]
    _, confirmed = await call(client, "write_episode", {**variant, "entity_resolutions": [
        {"mention": "Postgres", "entity_id": candidate["entity_id"], "rationale": "same database, short name"}]})
    # Learned: the next mention of "postgres" resolves silently through the alias.
    _, silent = await call(client, "write_episode", episode(
        [("postgres", "database"), ("Audit job", "job")],
        [fact("Audit job", "postgres", "scans", "The audit job scans postgres for orphans.")]))
    assert confirmed["stored"] is True and confirmed["edges_created"][0]["target"] == "PostgreSQL"
    assert silent["stored"] is True and silent["deferred"] == []
    rows = await sql(handlers.conn, "SELECT after->>'how', reason, entity_id::text FROM audit_log "
                                         "WHERE kind = 'entity_resolved' AND after->>'entity' = 'PostgreSQL' ORDER BY id")
    assert [(r[0], r[2]) for r in rows] == [("agent-confirmed", candidate["entity_id"]), ("alias", candidate["entity_id"])]
    assert rows[0][1] == "same database, short name"
    assert await sql(handlers.conn, "SELECT alias FROM entity_aliases") == [("Postgres",)]


async def test_new_resolution_creates_a_separate_entity_but_never_a_duplicate_name(handlers: Handlers) -> None:
    client = Agent(handlers, "cursor")
    await call(client, "write_episode", episode(
        [("Grafana", "tool"), ("API", "service")],
        [fact("API", "Grafana", "is watched in", "The API is watched in Grafana.")]))
    newer = episode([("Grafanna", "tool"), ("Worker", "service")],
                    [fact("Worker", "Grafanna", "is watched in", "The worker is watched in Grafanna.")])
    _, deferred = await call(client, "write_episode", newer)
    _, created = await call(client, "write_episode", {
        **newer, "entity_resolutions": [{"mention": "Grafanna", "entity_id": "new"}]})
    is_error, clash = await call(client, "write_episode", {
        **newer, "entity_resolutions": [{"mention": "grafana", "entity_id": "new"}],
        "entities": [*newer["entities"], {"name": "grafana", "type": "tool"}]})
    assert deferred["not_stored"] == "deferred"  # a typo-like name: the agent decides
    assert deferred["deferred"][0]["candidates"][0]["rule"] == "typo"
    assert created["stored"] is True and created["edges_created"][0]["target"] == "Grafanna"
    assert is_error and clash["error"]["code"] == "invalid_argument" and "already has that name" in clash["error"]["message"]
    # The "new" answer keeps the candidate it rejected, for calibration.
    [(rejected,)] = await sql(handlers.conn, "SELECT after->'rejected_candidates' FROM audit_log "
                                                  "WHERE kind = 'entity_created' AND after->>'name' = 'Grafanna'")
    assert [c["name"] for c in rejected] == ["Grafana"]


async def test_an_entity_id_from_another_scope_is_refused(handlers: Handlers) -> None:
    await handlers.admin_call("writes", "scope_create", {"name": "team-a"})
    client = Agent(handlers, "codex", read=["shared", "team-a"], write=["shared", "team-a"])
    await call(client, "write_episode", {**PAYMENTS, "scope": "team-a"})
    [(stripe_in_team,)] = await sql(handlers.conn, "SELECT id::text FROM entities WHERE name = 'Stripe'")
    before = await counts(handlers.conn)
    is_error, result = await call(client, "write_episode", {
        **PAYMENTS, "entity_resolutions": [{"mention": "Stripe", "entity_id": stripe_in_team}]})
    assert is_error and result["not_stored"] == "refused"
    assert result["error"]["code"] == "not_found" and "does not exist in scope 'shared'" in result["error"]["message"]
    assert await counts(handlers.conn) == before


async def test_two_mentions_of_one_entity_are_one_entity(handlers: Handlers) -> None:
    client = Agent(handlers, "cursor")
    # Same name twice (case differs) and a name that is another entity's alias: one node each.
    _, first = await call(client, "write_episode", episode(
        [{"name": "Kubernetes", "type": "platform", "aliases": ["k8s"]}, ("kubernetes", "platform"),
         ("K8S", "platform"), ("Web app", "service")],
        [fact("Web app", "kubernetes", "is deployed on", "The web app is deployed on Kubernetes."),
         fact("K8S", "Web app", "restarts", "Kubernetes restarts the web app when its probe fails.")]))
    [(kube_id,)] = await sql(handlers.conn, "SELECT id::text FROM entities WHERE name = 'Kubernetes'")
    # A confirmed mention and an exact mention of the same stored entity in one call.
    _, second = await call(client, "write_episode", {**episode(
        [("Kube", "platform"), ("kubernetes", "platform"), ("Batch job", "job")],
        [fact("Batch job", "Kube", "is scheduled by", "The batch job is scheduled by Kubernetes."),
         fact("kubernetes", "Batch job", "evicts", "Kubernetes evicts the batch job under memory pressure.")]),
        "entity_resolutions": [{"mention": "Kube", "entity_id": kube_id}]})
    assert first["stored"] and second["stored"], (first, second)
    assert sorted(r[0] for r in await sql(handlers.conn, "SELECT name FROM entities")) == [
        "Batch job", "Kubernetes", "Web app"]
    endpoints = await sql(handlers.conn, "SELECT source_entity::text, target_entity::text FROM facts")
    assert sum(kube_id in pair for pair in endpoints) == 4
