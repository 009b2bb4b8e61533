"""A service's connection pool after Postgres died and came back on the same port (real processes)."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator

import psycopg
import pytest

from echo_memory.libs.core.contracts.errors import Unavailable
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.local.supervisor.postgres import EmbeddedPostgres
from echo_memory.libs.server.service.errors import as_echo_error
from echo_memory.libs.server.store.pool import OrgDatabases
from echo_memory.libs.server.store.schema import apply_migrations
from echo_memory.libs.testing import server_dir


@pytest.fixture
def own_postgres() -> Iterator[EmbeddedPostgres]:
    """A Postgres of this test's own: killing the session's server would break every other test."""
    base = server_dir("pool-restart")
    server = EmbeddedPostgres(base, free_port(), durable=False)
    server.start()
    apply_migrations(server.url())
    yield server
    server.stop()
    shutil.rmtree(base, ignore_errors=True)


async def _in_use_together(databases: OrgDatabases, count: int) -> None:
    """Check out `count` connections at once, so the pool holds that many afterwards."""
    pool = await databases.pool("local")
    connections = [await pool.getconn() for _ in range(count)]
    for conn in connections:
        await pool.putconn(conn)


async def test_every_request_after_a_postgres_restart_succeeds(own_postgres: EmbeddedPostgres) -> None:
    databases = OrgDatabases("local", own_postgres.url())
    try:
        await _in_use_together(databases, 4)
        os.kill(own_postgres.pid() or 0, signal.SIGKILL)
        own_postgres.process.wait(timeout=10)  # type: ignore[union-attr]
        own_postgres.start()  # same port, as the supervisor restarts it
        for _ in range(6):  # more requests than the pool held stale connections
            async with databases.transaction("local") as conn:
                assert await (await conn.execute("SELECT 1")).fetchone() == (1,)
    finally:
        await databases.close()


async def test_a_request_while_postgres_stays_down_is_a_retryable_error_in_bounded_time(
    own_postgres: EmbeddedPostgres,
) -> None:
    databases = OrgDatabases("local", own_postgres.url())
    try:
        await _in_use_together(databases, 1)
        os.kill(own_postgres.pid() or 0, signal.SIGKILL)
        own_postgres.process.wait(timeout=10)  # type: ignore[union-attr]
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError) as caught:  # the pool waits its time-out for a new connection
            async with databases.transaction("local") as conn:
                await conn.execute("SELECT 1")
        assert time.monotonic() - started < 12
        # What a caller gets from the service runtime's error seam: a retryable `unavailable`.
        error = as_echo_error(caught.value, "writes")
        assert isinstance(error, Unavailable) and error.retryable
        with pytest.raises(psycopg.OperationalError):  # still down: nothing pretends otherwise
            psycopg.connect(own_postgres.url(), connect_timeout=2).close()
    finally:
        await databases.close()


async def test_a_connection_whose_backend_was_ended_is_replaced_before_a_request_sees_it(
    own_postgres: EmbeddedPostgres,
) -> None:
    databases = OrgDatabases("local", own_postgres.url())
    try:
        await _in_use_together(databases, 2)
        pool = await databases.pool("local")
        assert pool.get_stats()["pool_available"] == 2
        with psycopg.connect(own_postgres.url(), autocommit=True) as admin:
            # With a time-out the call returns once each backend has ended (sent its error and
            # closed); without, it returns when the signal is sent, and a connection lent in that
            # instant has nothing on its socket yet for any check to find.
            ended = admin.execute(
                "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            ).fetchone()
        assert ended == (2,)
        for _ in range(4):
            async with databases.transaction("local") as conn:
                assert await (await conn.execute("SELECT 1")).fetchone() == (1,)
        assert pool.get_stats().get("connections_lost", 0) >= 1  # the check found them, not a request
    finally:
        await databases.close()
