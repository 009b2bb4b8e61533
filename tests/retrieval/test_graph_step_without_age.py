"""reindex's graph step on a database without Apache AGE (the embedded default): it says so, changes nothing."""

from __future__ import annotations

import asyncio

import psycopg

from echo_memory.libs.local.stack import EchoStack


async def test_the_graph_step_reports_that_there_is_no_age(stack: EchoStack) -> None:
    token = stack.issue_token("no-age")
    async with stack.client(token) as mcp:
        written = await mcp.call_tool("write_episode", {
            "session_id": "no-age", "scope": "shared",
            "entities": [{"name": "Billing API", "type": "service"}, {"name": "Postgres", "type": "database"}],
            "facts": [{"source": "Billing API", "target": "Postgres", "relation": "stores invoices in",
                       "fact": "The billing API stores its invoices in Postgres.", "confidence": "extracted"}],
        })
        assert not written.is_error, written.content
    result = await stack.admin_call("reindex", "reindex", {"step": "graph"})
    assert result["processed"] == 0 and result["total"] == 1
    assert "no Apache AGE" in result["skipped"]

    def graph_schema() -> object:
        with psycopg.connect(stack.database_url) as conn:
            return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname IN ('ag_catalog', 'echo_memory')").fetchone()

    assert await asyncio.to_thread(graph_schema) is None  # nothing was created
    # The fact event was consumed without AGE: the consumer acknowledged it and mirrored nothing.
    mirror = stack.running["reindex"].ctx.extra["graph_mirror"]
    for _ in range(100):
        if mirror.applied:
            break
        await asyncio.sleep(0.1)
    assert mirror.applied >= 1
