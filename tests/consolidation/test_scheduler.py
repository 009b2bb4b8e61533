"""Consolidation running by itself, full stack: a write's events reach the service over JetStream,
and the scope is consolidated once quiet; a second replica finds the lease taken and skips."""

from __future__ import annotations

import asyncio

import psycopg

from echo_memory.libs.core.config.consolidation import ConsolidationSettings
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing import EchoStack
from echo_memory.services.consolidation.scheduler import Scheduler
from echo_memory.services.consolidation.worker import TRY_LEASE

EPISODE = {
    "session_id": "s-auto",
    "entities": [{"name": "Search service", "type": "service"}, {"name": "OpenSearch", "type": "database"},
                 {"name": "Kafka", "type": "queue"}, {"name": "Redis", "type": "cache"}],
    "facts": [
        {"source": "Search service", "target": "OpenSearch", "relation": "indexes into",
         "fact": "The search service indexes documents into OpenSearch.", "confidence": "extracted"},
        {"source": "Search service", "target": "Kafka", "relation": "consumes",
         "fact": "The search service consumes change events from Kafka.", "confidence": "extracted"},
        {"source": "Search service", "target": "Redis", "relation": "caches in",
         "fact": "The search service caches hot queries in Redis.", "confidence": "extracted"},
    ],
}
AUTO = ConsolidationSettings(auto=True, debounce_seconds=0.5, max_wait_seconds=5, sweep_minutes=60)


async def test_a_written_scope_is_consolidated_once_quiet_and_a_taken_lease_is_skipped(
    database_url: str, nats_url: str, org: str, embedder: MiniLM
) -> None:
    async with EchoStack(database_url=database_url, nats_url=nats_url, org=org, embedder=embedder,
                         consolidation=AUTO) as stack:
        async with stack.client(stack.issue_token("codex")) as client:
            written = (await client.call_tool("write_episode", EPISODE)).structured_content
        assert written is not None and written["stored"] is True
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            runs: list[tuple[str, str]] = []
            for _ in range(200):  # up to 20 s: the relay publishes, the consumer notes, the debounce passes
                runs = list(await (await conn.execute(
                    "SELECT r.actor, s.name FROM consolidation_runs r JOIN scopes s ON s.id = r.scope_id")).fetchall())
                if runs:
                    break
                await asyncio.sleep(0.1)
            assert runs == [("consolidation", "shared")]
            entity_digests = await (await conn.execute(
                "SELECT count(*) FROM digests WHERE kind = 'entity' AND valid_to IS NULL")).fetchone()
            assert entity_digests == (1,)  # the search service has three facts
            scope_id = str((await (await conn.execute("SELECT id FROM scopes WHERE name = 'shared'")).fetchone())[0])  # type: ignore[index]

            # Another replica holds the lease: this one skips the scope and records no run.
            scheduler: Scheduler = stack.running["consolidation"].ctx.extra["scheduler"]
            registry = scheduler.ctx.metrics.registry

            def skipped() -> float | None:
                return registry.get_sample_value("echo_consolidation_total", {"outcome": "skipped"})

            skipped_before = skipped()
            assert skipped_before is not None
            async with conn.transaction():
                assert (await (await conn.execute(TRY_LEASE, {"scope_id": scope_id})).fetchone()) == (True,)
                await scheduler.run_scope(org, scope_id)
            assert skipped() == skipped_before + 1
            assert (await (await conn.execute("SELECT count(*) FROM consolidation_runs")).fetchone()) == (1,)
