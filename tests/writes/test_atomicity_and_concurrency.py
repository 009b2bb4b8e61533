"""One transaction per call, proven by breaking it inside the database; one active edge under load.

Breaking a call's transaction needs real commits (every service's routes on the in-memory broker,
on their own pool); concurrent writers run on the full stack, over real NATS, with three instances
of the writes service in one queue group.
"""

from __future__ import annotations

import asyncio

from echo_memory.libs.server.service.runner import start_service
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import Routes
from echo_memory.services.writes.app import routes
from tests.writes.conftest import PAYMENTS, RESULT_KEYS, Bus, counts, episode, fact, sql

THREE_FACTS = episode(
    [("Checkout", "service"), ("Stripe", "vendor"), ("Redis", "cache"), ("Kafka", "queue")],
    [
        fact("Checkout", "Stripe", "charges through", "Checkout charges cards through Stripe."),
        fact("Checkout", "Redis", "caches carts in", "Checkout caches carts in Redis."),
        fact("Checkout", "Kafka", "publishes to", "Checkout publishes order events to Kafka. BOOM"),
    ],
    idempotency_key="atomic-1",
)


async def test_a_statement_failing_after_other_inserts_leaves_nothing_behind(routes: Routes) -> None:
    bus = Bus(routes.client, routes.org)
    # Entities, the episode, two facts, their audit rows and events are inserted before the third
    # fact breaks this CHECK; everything must roll back with it.
    await sql(routes.database_url, "ALTER TABLE facts ADD CONSTRAINT test_no_boom CHECK (text NOT LIKE '%%BOOM%%')")
    result = await bus.write(THREE_FACTS)
    assert set(result) == RESULT_KEYS
    assert result["not_stored"] == "refused" and result["error"]["code"] == "internal"
    assert "nothing was changed" in result["error"]["message"]
    assert sum((await counts(routes.database_url)).values()) == 0


async def test_a_failure_at_commit_leaves_nothing_behind(routes: Routes) -> None:
    bus = Bus(routes.client, routes.org)
    # A deferred constraint trigger fires at COMMIT, after every statement of the call succeeded.
    await sql(routes.database_url, """
        CREATE FUNCTION test_fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'refused at commit by the test'; END $$;
        CREATE CONSTRAINT TRIGGER test_commit_breaker AFTER INSERT ON outbox
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_fail_at_commit();
    """)
    keyed = {**PAYMENTS, "idempotency_key": "commit-1"}
    result = await bus.write(keyed)
    assert result["not_stored"] == "refused" and result["error"]["code"] == "internal"
    assert sum((await counts(routes.database_url)).values()) == 0
    # With the breaker gone the same call (same key) stores normally: the failed one left no key behind.
    await sql(routes.database_url, "DROP TRIGGER test_commit_breaker ON outbox")
    assert (await bus.write(keyed))["stored"] is True


async def test_many_concurrent_writers_on_one_key_leave_exactly_one_active_edge(stack: EchoStack, bus: Bus) -> None:
    # Three replicas in one queue group, each handling several requests at once.
    extra = [await start_service("writes", routes, stack.settings, embedder=stack.embedder) for _ in range(2)]
    try:
        claims = [
            episode([("Payments service", "service"), ("Stripe", "vendor")],
                    [fact("Payments service", "Stripe", "charges cards through",
                          f"The payments service charges cards through Stripe (revision {i}).")])
            for i in range(24)
        ]
        results = await asyncio.gather(*(bus.write(c, agent=f"agent-{i % 3}") for i, c in enumerate(claims)))
    finally:
        for running in extra:
            await running.stop()
    assert [r["error"] for r in results if r["error"]] == []
    assert all(r["stored"] for r in results)
    assert (await sql(stack.database_url, "SELECT count(*) FROM entities"))[0][0] == 2
    rows = await sql(stack.database_url, "SELECT id::text, supersedes::text, t_invalid FROM facts")
    assert len(rows) == 24
    assert sum(1 for r in rows if r[2] is None) == 1
    # One linear chain: every version but the first ends exactly one other, and no edge is ended twice.
    ended = [r[1] for r in rows if r[1] is not None]
    assert len(ended) == 23 and len(set(ended)) == 23
    assert {r[0] for r in rows if r[2] is not None} == set(ended)


async def test_concurrent_identical_claims_store_one_edge(stack: EchoStack, bus: Bus) -> None:
    results = await asyncio.gather(*(bus.write({**PAYMENTS, "session_id": f"s-{i}"}) for i in range(10)))
    outcomes = sorted(r["not_stored"] or "stored" for r in results)
    assert outcomes == ["stored"] + ["unchanged"] * 9
    assert (await counts(stack.database_url))["facts"] == 1
