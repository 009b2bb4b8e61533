"""One async connection pool per org, opened on the org's first request."""

from __future__ import annotations

import asyncio
import logging
import select
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool

from echo_memory.libs.core.contracts.errors import NotFound, Unavailable
from echo_memory.libs.server.store.schema import check_version, read_version_async
from echo_memory.libs.server.telemetry import steps

log = logging.getLogger(__name__)

OrgLookup = Callable[[str], Awaitable[str | None]]


async def check_when_readable(conn: psycopg.AsyncConnection) -> None:
    """The pool's check before it lends `conn`: a round trip only when the socket has something to read.

    A connection idle in the pool has nothing to read unless its server ended it (a restart or a
    terminated backend sends its error and closes) or sent something unasked; then the server is
    asked, and a dead connection raises, so the pool replaces it before a request sees it. A
    healthy idle connection costs one poll instead of a round trip per request.
    """
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    if poller.poll(0):
        await AsyncConnectionPool.check_connection(conn)


class OrgDatabases:
    """Maps an org to its pool. The default org's URL comes from settings; others from a lookup."""

    def __init__(
        self, default_org: str, default_url: str | None, lookup: OrgLookup | None = None, *, max_size: int = 8
    ) -> None:
        self._max_size = max_size
        self._urls: dict[str, str] = {default_org: default_url} if default_url else {}
        self._lookup = lookup
        self._pools: dict[str, AsyncConnectionPool] = {}
        self._lock = asyncio.Lock()

    async def pool(self, org: str) -> AsyncConnectionPool:
        existing = self._pools.get(org)
        if existing is not None:
            return existing
        async with self._lock:
            if org in self._pools:
                return self._pools[org]
            url = self._urls.get(org)
            if url is None and self._lookup is not None:
                url = await self._lookup(org)
            if url is None:
                raise NotFound(f"org '{org}' is not registered with this deployment")
            # Without a check every connection left from before a Postgres restart fails one request
            # before the pool replaces it.
            pool = AsyncConnectionPool(
                url, min_size=1, max_size=self._max_size, configure=register_vector_async, open=False, timeout=10,
                check=check_when_readable,
            )
            try:
                await pool.open(wait=True, timeout=10)
            except Exception as exc:  # psycopg_pool raises its own PoolTimeout on unreachable hosts
                await pool.close()
                raise Unavailable(f"the database of org '{org}' cannot be reached") from exc
            async with pool.connection() as conn:
                check_version(await read_version_async(conn))
            self._pools[org] = pool
            self._urls[org] = url
            return pool

    async def url(self, org: str) -> str | None:
        """The URL of the org's database, as its pool connects, for a process of a service's own;
        None when another connection would not see what this one's transactions write."""
        await self.pool(org)
        return self._urls[org]

    @asynccontextmanager
    async def transaction(self, org: str) -> AsyncIterator[psycopg.AsyncConnection]:
        """A connection inside one transaction: everything commits together or not at all."""
        pool = await self.pool(org)
        # Database errors pass through as they are: the service runtime's error seam tells a
        # conflict (retry the same call) from an outage.
        opened = steps.started()
        async with pool.connection() as conn:
            async with conn.transaction():
                steps.since("connection_and_begin", opened)
                yield conn
                committing = steps.started()
            steps.since("commit", committing)

    @asynccontextmanager
    async def autocommit(self, org: str) -> AsyncIterator[psycopg.AsyncConnection]:
        """A connection on which each statement commits alone: nothing stays open between them.

        For a request that waits a long time on work done elsewhere (a consolidation run in a
        process of its own): a transaction left open meanwhile would hold back VACUUM for the whole
        database and end under an `idle_in_transaction_session_timeout`.
        """
        pool = await self.pool(org)
        async with pool.connection() as conn:
            await conn.set_autocommit(True)
            try:
                yield conn
            finally:
                if not conn.closed:  # the pool lends it to the next request in its usual mode
                    await conn.set_autocommit(False)

    @asynccontextmanager
    async def reader(self, org: str) -> AsyncIterator[psycopg.AsyncConnection]:
        """A second connection for reads that may run beside a request's transaction.

        It sees what is committed, as each statement of a READ COMMITTED transaction does, and
        must never write: writes belong to the request's one transaction (`transaction`).
        """
        pool = await self.pool(org)
        async with pool.connection() as conn:
            yield conn

    def pool_stats(self) -> dict[str, dict[str, int]]:
        """psycopg_pool's statistics of each org's open pool (size, available, waiting, max), by org."""
        return {org: pool.get_stats() for org, pool in self._pools.items()}

    async def close(self) -> None:
        for pool in self._pools.values():
            await pool.close()
        self._pools.clear()
