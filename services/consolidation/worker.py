"""Consolidation runs in a process of their own.

On a laptop every service shares one process, and a run's seconds of Python at 100k facts take the
interpreter's lock from the loop that serves writes and queries even in a worker thread: beside
back-to-back runs, writes kept 0.11-0.24 of their pace. A run therefore goes to a child process,
one run at a time, a fresh child for each: a run over 100k facts grows its process to ~0.9 GB, which
Python would keep between runs. The child opens its own connection to the org's database, so the
run's transaction, lease and statements are its own; what crosses the process boundary is a
`RunJob` and a `RunOutcome`, both pydantic models.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import psycopg
from pgvector.psycopg import register_vector_async
from pydantic import BaseModel

from echo_memory.libs.core.config.consolidation import ConsolidationSettings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.consolidation import ScopeRun
from echo_memory.libs.core.contracts.errors import ErrorInfo, Unavailable, from_info
from echo_memory.libs.server.service.errors import as_echo_error
from echo_memory.libs.server.store.pool import OrgDatabases
from echo_memory.services.consolidation import runs

SERVICE = "consolidation"
# The run's lease: a transaction-scoped advisory lock of its own, never the scope's write lock.
TRY_LEASE = "SELECT pg_try_advisory_xact_lock(hashtextextended('consolidation:' || %(scope_id)s, 0))"
PARENT_CHECK_SECONDS = 1.0
# How the run's connection shows in pg_stat_activity.
APPLICATION_NAME = "echo-memory consolidation run"


class RunJob(BaseModel):
    """One scope's run, as the run process receives it."""

    caller: Caller
    scope_id: str
    scope_name: str | None = None  # None: looked up in the run's transaction (a scope erased since is skipped)
    policy: ConsolidationSettings
    dry_run: bool = False
    lease: bool = False  # take the scope's lease first; when another run holds it, skip


class RunOutcome(BaseModel):
    """What a run came to: its result, or that it did not run and why, or its typed error."""

    run: ScopeRun | None = None
    leased_elsewhere: bool = False
    scope_gone: bool = False
    error: ErrorInfo | None = None


async def run_on(conn: psycopg.AsyncConnection, job: RunJob) -> RunOutcome:
    """One run on `conn`, inside the transaction its caller opened; raises what the run raises."""
    if job.lease:
        leased = (await (await conn.execute(TRY_LEASE, {"scope_id": job.scope_id})).fetchone())[0]  # type: ignore[index]
        if not leased:
            return RunOutcome(leased_elsewhere=True)
    name = job.scope_name or await runs.scope_name(conn, job.scope_id)
    if name is None:
        return RunOutcome(scope_gone=True)
    return RunOutcome(run=await runs.run_scope(conn, job.caller, runs.ScopeRef(job.scope_id, name), job.policy,
                                               job.dry_run))


def run_alone(database_url: str, job: RunJob) -> RunOutcome:
    """The child's entry point: one run on a connection and transaction of its own; every failure
    comes back as data."""
    return asyncio.run(_run_alone(database_url, job))


async def _run_alone(database_url: str, job: RunJob) -> RunOutcome:
    try:
        async with await psycopg.AsyncConnection.connect(database_url, application_name=APPLICATION_NAME) as conn:
            await register_vector_async(conn)
            async with conn.transaction():
                return await run_on(conn, job)
    except Exception as exc:  # noqa: BLE001 - returned typed; the parent raises it
        return RunOutcome(error=as_echo_error(exc, SERVICE).to_info())


def _exit_with_parent() -> None:
    """In the child: end when the process that spawned it is gone, even killed without a word."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


class RunProcess:
    """The service's run processes: one run at a time, each in a child spawned for it.

    Where the databases give no URL another process may use (the handler test tier's one
    connection), a run goes in this process, in a transaction of `databases`, as before.
    """

    def __init__(self, databases: OrgDatabases) -> None:
        self._databases = databases
        self._pool: ProcessPoolExecutor | None = None

    async def run(self, org: str, job: RunJob) -> RunOutcome:
        """The run's outcome; raises its typed error, or Unavailable when the child process died
        (the next run starts over with a new one)."""
        url = await self._databases.url(org)
        if url is None:
            async with self._databases.transaction(org) as conn:
                return await run_on(conn, job)
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_exit_with_parent, max_tasks_per_child=1)
        try:
            outcome = await asyncio.get_running_loop().run_in_executor(self._pool, run_alone, url, job)
        except BrokenProcessPool as exc:
            self._pool = None
            raise Unavailable("the consolidation run's process ended before the run did; nothing it did was "
                              "committed unless `consolidate log` lists the run") from exc
        if outcome.error is not None:
            raise from_info(outcome.error)
        return outcome

    async def close(self) -> None:
        """End the child process; a run still going is abandoned (its transaction rolls back)."""
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        # A running child is ended, not waited for: a run can take minutes (Python before 3.14 has no
        # public way). An idle one, or one spawned to replace a child that just finished, exits when
        # told to, once started.
        for child in list(pool._processes.values()):
            child.terminate()
        await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)
