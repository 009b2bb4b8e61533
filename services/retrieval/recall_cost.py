"""What a recall cost, beside what it saved: facts and tokens returned against a full dump.

A full dump is every active fact of the scopes read pasted whole, the alternative to recall.
Its size is the sum of the facts' token counts, read per set of scopes at most once every
DUMP_TTL_SECONDS (a sum over the scope, too slow to repeat on every query of a 100k-fact store),
so the figure can lag the store by that long. It is the store now, also for an `as_of` read.
The figures go on the request's span (attributes below) and into the service's metrics.
"""

from __future__ import annotations

import time

import psycopg
from opentelemetry import trace

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.query import ItemKind, QueryMemoryResult
from echo_memory.libs.server.store.access import stored_name
from echo_memory.libs.server.telemetry.metrics import ServiceMetrics

DUMP_TTL_SECONDS = 30.0
FULL_DUMP_TOKENS = """
SELECT coalesce(sum(f.token_count), 0)::bigint
FROM facts f JOIN scopes s ON s.id = f.scope_id
WHERE s.name = ANY(%(names)s) AND f.t_invalid IS NULL
"""

# Span attribute names (docs/operations.md).
FACTS_RETURNED = "echo.recall.facts_returned"
ITEMS_RETURNED = "echo.recall.items_returned"
TOKENS_RETURNED = "echo.recall.tokens_returned"
FULL_DUMP = "echo.recall.full_dump_tokens"
CHANNELS = "echo.recall.channels"


class DumpCost:
    """Full-dump token counts per (org, scope set), each kept for DUMP_TTL_SECONDS."""

    def __init__(self, ttl: float = DUMP_TTL_SECONDS) -> None:
        self.ttl = ttl
        self._known: dict[tuple[str, tuple[str, ...]], tuple[float, int]] = {}

    async def tokens(self, conn: psycopg.AsyncConnection, org: str, stored_names: list[str]) -> int:
        key = (org, tuple(sorted(stored_names)))
        now = time.monotonic()
        cached = self._known.get(key)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        row = await (await conn.execute(FULL_DUMP_TOKENS, {"names": list(key[1])})).fetchone()
        value = int(row[0]) if row else 0
        self._known[key] = (now, value)
        return value


async def record(
    conn: psycopg.AsyncConnection, caller: Caller, result: QueryMemoryResult, dump: DumpCost, metrics: ServiceMetrics
) -> None:
    """Put the recall's cost on the current span and count it in the metrics."""
    names = [stored_name(caller, name) for name in result.scopes]
    full = await dump.tokens(conn, caller.org, names)
    facts = sum(1 for item in result.results if item.kind == ItemKind.FACT)
    channels = sorted({c for item in result.results for c in item.matched})
    span = trace.get_current_span()
    span.set_attribute(FACTS_RETURNED, facts)
    span.set_attribute(ITEMS_RETURNED, len(result.results))
    span.set_attribute(TOKENS_RETURNED, result.total_tokens)
    span.set_attribute(FULL_DUMP, full)
    span.set_attribute(CHANNELS, channels)
    agent = caller.agent_id
    metrics.recalls.labels(agent).inc()
    metrics.recall_tokens.labels(agent).inc(result.total_tokens)
    metrics.recall_dump_tokens.labels(agent).inc(full)
    metrics.recall_facts.labels(agent).inc(facts)
    if not result.results:
        metrics.recall_empty.labels(agent).inc()
    for item in result.results:
        for channel in item.matched:
            metrics.channel_results.labels(channel).inc()
