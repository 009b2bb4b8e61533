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
from echo_memory.services.consolidation import prewarm, runs

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
                outcome = await run_on(conn, job)
            if outcome.run is not None and outcome.run.run_id is not None:  # committed, not a dry run
                outcome.run.prewarm = await prewarm.hot_pages(conn)
            return outcome
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
    """The service's run processes: one run at a time, each in a child spawned for it and ended
    with it, so no child waits between runs (a waiting one would hold its imports' memory and
    cost their CPU after every run for nothing).

    Where the databases give no URL another process may use (the handler test tier's one
    connection), a run goes in this process, in a transaction of `databases`, as before.
    """

    def __init__(self, databases: OrgDatabases) -> None:
        self._databases = databases
        self._one_at_a_time = asyncio.Lock()
        self._running: ProcessPoolExecutor | None = None
        self._closed = False

    async def run(self, org: str, job: RunJob) -> RunOutcome:
        """The run's outcome; raises its typed error, or Unavailable when the child process died
        (the next run starts over with a new one)."""
        url = await self._databases.url(org)
        if url is None:
            async with self._databases.transaction(org) as conn:
                return await run_on(conn, job)
        async with self._one_at_a_time:
            if self._closed:
                raise Unavailable("the consolidation service is stopping; retry once it is back")
            child = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_exit_with_parent)
            self._running = child
            running = child.submit(run_alone, url, job)
            try:
                outcome = await asyncio.wrap_future(running)
            except BrokenProcessPool as exc:
                raise Unavailable("the consolidation run's process ended before the run did; nothing it did was "
                                  "committed unless `consolidate log` lists the run") from exc
            finally:
                self._running = None
                if not running.done():  # the caller gave up waiting (the service stops): end the run too
                    _terminate(child)
                await asyncio.to_thread(child.shutdown, wait=True, cancel_futures=True)
        if outcome.error is not None:
            raise from_info(outcome.error)
        return outcome

    async def close(self) -> None:
        """End the child process and wait until it is gone; a run still going is abandoned (its
        transaction rolls back), and no run starts after this."""
        self._closed = True
        if self._running is not None:
            _terminate(self._running)
        async with self._one_at_a_time:  # the run's own clean-up has shut its child down
            pass


def _terminate(child: ProcessPoolExecutor) -> None:
    # A running child is ended, not waited for: a run can take minutes (Python before 3.14 has no
    # public way to terminate a pool's workers).
    for process in list(child._processes.values()):
        process.terminate()

