"""Look-alike names on the handler tier: distinct things stay distinct, spellings become aliases,
deferrals say what to send back, and facts that do not wait on a deferral are stored (`partial`)."""

from __future__ import annotations

import psycopg

from echo_memory.libs.testing.agents import Agent
from echo_memory.libs.testing.tiers import Handlers
from tests.writes.conftest import call, counts, episode, fact, sql


async def _entities(url: str | psycopg.AsyncConnection) -> list[str]:
    return sorted(r[0] for r in await sql(url, "SELECT name FROM entities"))


async def test_names_differing_in_a_number_version_or_qualifier_are_new_entities_never_deferred(
    handlers: Handlers,
) -> None:
    client = Agent(handlers, "claude-code")
    _, first = await call(client, "write_episode", episode(
        [("Payments API", "service"), ("Postgres 15", "database"), ("session cache", "cache"),
         ("Checkout", "service")],
        [fact("Payments API", "Postgres 15", "stores data in", "The payments API stores data in Postgres 15."),
         fact("Checkout", "session cache", "reads", "Checkout reads the session cache.")]))
    _, second = await call(client, "write_episode", episode(
        [("Payments API v7", "service"), ("Postgres 16", "database"), ("transaction cache", "cache"),
         ("Ledger", "service")],
        [fact("Payments API v7", "Postgres 16", "stores data in", "Payments API v7 stores data in Postgres 16."),
         fact("Ledger", "transaction cache", "writes", "The ledger writes the transaction cache.")],
        session_id="s-2"))
    assert first["stored"] and second["stored"], second
    assert second["deferred"] == [] and second["aliased"] == [] and second["partial"] is False
    assert await _entities(handlers.conn) == sorted([
        "Payments API", "Postgres 15", "session cache", "Checkout",
        "Payments API v7", "Postgres 16", "transaction cache", "Ledger"])


async def test_two_entities_declared_in_one_episode_are_never_resolved_into_each_other(handlers: Handlers) -> None:
    client = Agent(handlers, "cursor")
    await call(client, "write_episode", episode(
        [("Grafana", "tool"), ("Payments API", "service")],
        [fact("Payments API", "Grafana", "is watched in", "The payments API is watched in Grafana.")]))
    # "Grafanna" would be deferred and "payments-api" merged into the stored look-alike, but this
    # episode declares both names beside the stored ones: they are other entities.
    _, both = await call(client, "write_episode", episode(
        [("Grafana", "tool"), ("Grafanna", "tool"), ("Payments API", "service"), ("payments-api", "repo")],
        [fact("Grafanna", "Grafana", "forks", "Grafanna is an internal fork of Grafana."),
         fact("payments-api", "Payments API", "builds", "The payments-api repository builds the Payments API.")],
        session_id="s-2"))
    assert both["stored"] is True and both["deferred"] == [] and both["aliased"] == [], both
    assert await _entities(handlers.conn) == ["Grafana", "Grafanna", "Payments API", "payments-api"]


async def test_a_spelling_variant_becomes_an_audited_alias_visible_in_why(handlers: Handlers) -> None:
    client = Agent(handlers, "codex")
    await call(client, "write_episode", episode(
        [("Payments API", "service"), ("Stripe", "vendor")],
        [fact("Payments API", "Stripe", "charges through", "The payments API charges cards through Stripe.")]))
    _, variant = await call(client, "write_episode", episode(
        [("payments-api", "service"), ("Ledger", "service")],
        [fact("payments-api", "Ledger", "posts to", "The payments API posts every charge to the ledger.")],
        session_id="s-2"))
    assert variant["stored"] is True and variant["deferred"] == []
    [aliased] = variant["aliased"]
    assert (aliased["mention"], aliased["entity"], aliased["rule"]) == ("payments-api", "Payments API", "same_form")
    assert variant["edges_created"][0]["source"] == "Payments API"
    assert await sql(handlers.conn, "SELECT alias FROM entity_aliases") == [("payments-api",)]
    [(how, rule, reason)] = await sql(handlers.conn, "SELECT after->>'how', after->>'rule', reason FROM audit_log "
                                                         "WHERE kind = 'entity_resolved'")
    assert (how, rule) == ("variant", "same_form") and "written another way" in reason
    # `echo-memory why` (the audit service's verb) shows the alias and how it was learned.
    trail = await handlers.admin_call("audit", "why", {"fact_id": variant["edges_created"][0]["fact_id"]})
    source = next(e for e in trail["entities"] if e["role"] == "source")
    assert "payments-api" in source["aliases"]
    assert [r["after"].get("how") for r in source["resolutions"]] == [None, "variant"]


async def test_a_deferral_names_candidates_and_the_answer_and_stores_the_facts_that_do_not_wait(
    handlers: Handlers,
) -> None:
    client = Agent(handlers, "claude-code")
    await call(client, "write_episode", episode(
        [("Kubernetes", "platform"), ("Web app", "service")],
        [fact("Web app", "Kubernetes", "runs on", "The web app runs on Kubernetes.")]))
    before = await counts(handlers.conn)
    mixed = episode(
        [("k8s", "platform"), ("Billing job", "job"), ("Stripe", "vendor"), ("Reports job", "job")],
        [fact("Billing job", "k8s", "runs on", "The billing job runs on k8s."),
         fact("Billing job", "Stripe", "charges through", "The billing job charges cards through Stripe."),
         fact("Reports job", "Stripe", "reads payouts from", "The reports job reads payouts from Stripe.")],
        session_id="s-2")
    _, partial = await call(client, "write_episode", mixed)
    after_partial = await counts(handlers.conn)
    [waiting] = partial["deferred"]
    choice = waiting["candidates"][0]
    _, answered = await call(client, "write_episode", {
        **mixed, "facts": [mixed["facts"][i - 1] for i in waiting["waiting_facts"]],
        "entity_resolutions": [{"mention": "k8s", "entity_id": choice["entity_id"]}]})
    assert partial["stored"] is True and partial["partial"] is True and partial["not_stored"] is None
    assert sorted(e["target"] for e in partial["edges_created"]) == ["Stripe", "Stripe"]
    assert waiting["mention"] == "k8s" and waiting["waiting_facts"] == [1]
    assert (choice["name"], choice["rule"]) == ("Kubernetes", "numeronym")
    assert "entity_resolutions" in waiting["answer"] and choice["entity_id"] in waiting["answer"]
    assert '"new"' in waiting["answer"]
    assert after_partial["facts"] == before["facts"] + 2
    assert "k8s" not in await _entities(handlers.conn)
    assert answered["stored"] is True and answered["edges_created"][0]["target"] == "Kubernetes"
    assert await sql(handlers.conn, "SELECT alias FROM entity_aliases") == [("k8s",)]
