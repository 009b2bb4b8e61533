"""What a recall cost, beside what it saved: facts and tokens returned against a full dump.

A full dump is every current fact of the scopes read pasted whole, the alternative to recall.
Its size is kept per scope as facts are written (libs/server/store/fact_tokens.py), so a recall
reads one row a scope. It is the store now, also for an `as_of` read.
The figures go on the request's span (attributes below) and into the service's metrics.
"""

from __future__ import annotations

import psycopg
from opentelemetry import trace

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.query import ItemKind, QueryMemoryResult
from echo_memory.libs.server.store.access import stored_name
from echo_memory.libs.server.store.fact_tokens import full_dump_tokens
from echo_memory.libs.server.telemetry.metrics import ServiceMetrics

# Span attribute names (docs/operations.md).
FACTS_RETURNED = "echo.recall.facts_returned"
ITEMS_RETURNED = "echo.recall.items_returned"
TOKENS_RETURNED = "echo.recall.tokens_returned"
FULL_DUMP = "echo.recall.full_dump_tokens"
CHANNELS = "echo.recall.channels"


async def record(
    conn: psycopg.AsyncConnection, caller: Caller, result: QueryMemoryResult, metrics: ServiceMetrics
) -> None:
    """Put the recall's cost on the current span and count it in the metrics."""
    names = [stored_name(caller, name) for name in result.scopes]
    full = await full_dump_tokens(conn, names)
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
