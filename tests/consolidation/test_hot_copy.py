"""The copy between runs, full stack: facts written after a run reach the hot tier's indexes within
a few ticks and no run; while another holder has the scope's hot lock nothing is copied, and a run
waits for that lock before its tier moves."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg

from echo_memory.libs.core.config.consolidation import ConsolidationSettings
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing import EchoStack
from echo_memory.services.consolidation import queries
from echo_memory.services.consolidation.hot_copy import COPIED, HotCopy
from echo_memory.services.consolidation.worker import APPLICATION_NAME

TICK = 0.2
POLICY = ConsolidationSettings(auto=False, hot_copy_seconds=TICK)
SERVICE, LEDGER, QUEUE = "Billing service", "Ledger", "SQS"


def _episode(session: str, facts: list[tuple[str, str, str]]) -> dict[str, Any]:
    names = sorted({n for source, target, _ in facts for n in (source, target)})
    return {"session_id": session, "entities": [{"name": n, "type": "service"} for n in names],
            "facts": [{"source": s, "target": t, "relation": "uses", "fact": text, "confidence": "extracted"}
                      for s, t, text in facts]}


FIRST = _episode("s-1", [(SERVICE, LEDGER, "The billing service posts invoices to the ledger."),
                         (SERVICE, QUEUE, "The billing service reads refund requests from SQS.")])
LATER = _episode("s-2", [(SERVICE, "Stripe", "The billing service charges cards through Stripe.")])
HELD = _episode("s-3", [(SERVICE, "Postmark", "The billing service emails receipts through Postmark.")])
WHERE = ("SELECT f.text, EXISTS (SELECT 1 FROM hot_facts h WHERE h.fact_id = f.id), "
         "EXISTS (SELECT 1 FROM hot_pending p WHERE p.fact_id = f.id) FROM facts f WHERE f.text = %s")
RUNS = "SELECT count(*) FROM consolidation_runs"
SCOPE_ID = "SELECT id::text FROM scopes WHERE name = 'shared'"
RUN_WAITS_FOR_A_LOCK = """
SELECT count(*) FROM pg_stat_activity
WHERE application_name = %(name)s AND wait_event_type = 'Lock' AND wait_event = 'advisory'
"""


async def _where(conn: psycopg.AsyncConnection, text: str) -> tuple[bool, bool]:
    """(in hot_facts, in hot_pending) for the fact with `text`."""
    row = await (await conn.execute(WHERE, (text,))).fetchone()
    assert row is not None
    return bool(row[1]), bool(row[2])


async def _until(check: Any, seconds: float = 15) -> bool:
    for _ in range(int(seconds / 0.05)):
        if await check():
            return True
        await asyncio.sleep(0.05)
    return False


async def test_written_facts_are_copied_between_runs_and_the_hot_lock_keeps_copies_and_runs_apart(
    database_url: str, nats_url: str, org: str, embedder: MiniLM
) -> None:
    async with EchoStack(database_url=database_url, nats_url=nats_url, org=org, embedder=embedder,
                         consolidation=POLICY) as stack, \
            await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        copy: HotCopy = stack.running["consolidation"].ctx.extra["hot_copy"]
        registry = stack.running["consolidation"].ctx.metrics.registry
        async with stack.client(stack.issue_token("codex")) as client:
            assert (await client.call_tool("write_episode", FIRST)).structured_content["stored"] is True  # type: ignore[index]
            # A scope no run has placed keeps its facts waiting, however many ticks pass.
            await asyncio.sleep(5 * TICK)
            first = "The billing service posts invoices to the ledger."
            assert await _where(conn, first) == (False, True) and copy.copied == 0
            await stack.admin_call("consolidation", "consolidate", {"scope": "shared"})
            assert await _where(conn, first) == (True, False)

            # Written after the run: in the hot tier's indexes within a few ticks, with no run.
            assert (await client.call_tool("write_episode", LATER)).structured_content["stored"] is True  # type: ignore[index]
            later = "The billing service charges cards through Stripe."
            assert await _until(lambda: _where_is(conn, later, (True, False)))
            assert (await (await conn.execute(RUNS)).fetchone()) == (1,)
            assert copy.copied == 1
            assert registry.get_sample_value("echo_consolidation_total", {"outcome": COPIED}) == 1

            # Another holder of the scope's hot lock: nothing is copied, and a run waits for it
            # before its tier moves, then copies what waits itself.
            scope_id = str((await (await conn.execute(SCOPE_ID)).fetchone())[0])  # type: ignore[index]
            held = "The billing service emails receipts through Postmark."
            async with await psycopg.AsyncConnection.connect(database_url) as other, other.transaction():
                assert (await (await other.execute(queries.TRY_HOT_LOCK, {"scope_id": scope_id})).fetchone()) == (True,)
                assert (await client.call_tool("write_episode", HELD)).structured_content["stored"] is True  # type: ignore[index]
                await asyncio.sleep(5 * TICK)
                assert await _where(conn, held) == (False, True)
                run = asyncio.create_task(stack.admin_call("consolidation", "consolidate", {"scope": "shared"}))
                assert await _until(lambda: _count_is(conn, RUN_WAITS_FOR_A_LOCK, {"name": APPLICATION_NAME}, 1))
                assert not run.done()
            result = await asyncio.wait_for(run, 60)
            assert result["runs"][0]["run_id"] is not None
            assert await _where(conn, held) == (True, False)
            assert copy.copied == 1  # the run copied it, not the copy task


async def _where_is(conn: psycopg.AsyncConnection, text: str, expected: tuple[bool, bool]) -> bool:
    return await _where(conn, text) == expected


async def _count_is(conn: psycopg.AsyncConnection, sql: str, params: dict[str, Any], expected: int) -> bool:
    return (await (await conn.execute(sql, params)).fetchone()) == (expected,)
