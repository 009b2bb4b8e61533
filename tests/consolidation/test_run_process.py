"""A consolidation run goes to a process of the service's own, full stack: the services' process
keeps serving while it works, and a run whose process is killed commits nothing and is answered
`unavailable`, after which the next run succeeds in a new process."""

from __future__ import annotations

import asyncio
import os
import signal

import psutil
import psycopg
import pytest

from echo_memory.libs.core.contracts.errors import Unavailable
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing import EchoStack
from echo_memory.services.consolidation.worker import APPLICATION_NAME

EPISODE = {
    "session_id": "s-run-process",
    "entities": [{"name": "Ledger service", "type": "service"}, {"name": "Postgres", "type": "database"},
                 {"name": "NATS", "type": "queue"}],
    "facts": [
        {"source": "Ledger service", "target": "Postgres", "relation": "stores in",
         "fact": "The ledger service stores entries in Postgres.", "confidence": "extracted"},
        {"source": "Ledger service", "target": "NATS", "relation": "publishes to",
         "fact": "The ledger service publishes settlement events to NATS.", "confidence": "extracted"},
        {"source": "Ledger service", "target": "Postgres", "relation": "reads from",
         "fact": "The ledger service reads account limits from Postgres.", "confidence": "extracted"},
    ],
}
RUN_BACKENDS = "SELECT pid, wait_event_type FROM pg_stat_activity WHERE application_name = %(name)s"
# Sessions of this test's database left inside a transaction between statements, but `but`.
IDLE_IN_TRANSACTION = """
SELECT pid, query FROM pg_stat_activity
WHERE datname = current_database() AND state LIKE 'idle in transaction%%' AND pid <> %(but)s
"""


def _run_processes() -> list[psutil.Process]:
    """This test process's live children that multiprocessing spawned (the service's run processes)."""
    found = []
    for child in psutil.Process().children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "spawn_main" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


async def _runs(conn: psycopg.AsyncConnection) -> int:
    return int((await (await conn.execute("SELECT count(*) FROM consolidation_runs")).fetchone())[0])  # type: ignore[index]


async def _backends(conn: psycopg.AsyncConnection) -> list[tuple[int, str | None]]:
    return list(await (await conn.execute(RUN_BACKENDS, {"name": APPLICATION_NAME})).fetchall())


async def test_a_run_killed_with_its_process_commits_nothing_and_the_next_run_succeeds_in_a_new_one(
    database_url: str, nats_url: str, org: str, embedder: MiniLM
) -> None:
    async with EchoStack(database_url=database_url, nats_url=nats_url, org=org, embedder=embedder) as stack:
        async with stack.client(stack.issue_token("codex")) as client:
            written = (await client.call_tool("write_episode", EPISODE)).structured_content
        assert written is not None and written["stored"] is True
        first = await stack.admin_call("consolidation", "consolidate", {"scope": "shared"})
        assert first["runs"][0]["counts"]["digests_built"] >= 1
        assert _run_processes() == []  # the run's child ended with it: none waits for the next run

        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as watch, \
                await psycopg.AsyncConnection.connect(database_url) as blocker:
            assert await _runs(watch) == 1
            # The next run waits to record itself behind this lock (reads pass), so it is killed mid-run.
            await blocker.execute("LOCK TABLE consolidation_runs IN EXCLUSIVE MODE")
            second = asyncio.create_task(stack.admin_call("consolidation", "consolidate", {"scope": "shared"}))
            for _ in range(200):
                if [w for _, w in await _backends(watch) if w == "Lock"]:
                    break
                await asyncio.sleep(0.1)
            else:
                pytest.fail("the run never reached the locked table")
            # The request waiting for the run holds no transaction open meanwhile (VACUUM would wait
            # for it across the database, and a server's idle-in-transaction timeout would end it).
            assert await (await watch.execute(IDLE_IN_TRANSACTION, {"but": blocker.info.backend_pid})).fetchall() == []
            # Meanwhile the services' process answers other requests at once.
            assert (await stack.admin_call("consolidation", "consolidate_log", {}))["runs"][0]["run_id"] == \
                first["runs"][0]["run_id"]
            [child] = _run_processes()  # one run at a time: the one waiting on the lock
            os.kill(child.pid, signal.SIGKILL)
            with pytest.raises(Unavailable, match="process ended"):
                await second
            await blocker.rollback()
            for _ in range(100):  # the orphaned backend ends at its next read of the closed socket
                if not await _backends(watch):
                    break
                await asyncio.sleep(0.1)
            assert await _backends(watch) == []
            assert await _runs(watch) == 1

            third = await stack.admin_call("consolidation", "consolidate", {"scope": "shared"})
            assert third["runs"][0]["run_id"] != first["runs"][0]["run_id"]
            assert await _runs(watch) == 2
            assert _run_processes() == []
    assert _run_processes() == []  # the stack's stop ended every one
