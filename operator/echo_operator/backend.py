"""What the operator asks of Echo Memory itself (not of Kubernetes).

:class:`Backend` is the seam: claiming and serving an org's name in the bus registry, creating scopes
and issuing or revoking tokens in an org's database.  :class:`LiveBackend` calls the project's own
``echo_memory.libs.server.orgs`` over one long-lived NATS connection (every call bounded by a timeout, so a NATS outage
fails a reconcile in seconds) and ``echo_memory.libs.server.store.admin`` (sync psycopg calls run in a worker thread so
kopf's loop never blocks); tests may pass another implementation through kopf's memo.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from nats.aio.client import Client as NATS

T = TypeVar("T")


class OrgNameTaken(Exception):
    """The org name is registered by another owner (nothing was written)."""

    def __init__(self, org: str, owner: str | None, where: str | None) -> None:
        super().__init__(f"org {org} is registered by {owner or 'another registrant'}")
        self.org, self.owner, self.where = org, owner, where


class BusUnavailable(Exception):
    """NATS did not answer within the operator's bus timeout."""


class Backend(Protocol):
    """Operations on the Echo Memory side that the reconcilers need."""

    async def claim_org(self, org: str, *, owner: str, database_url: str, serve: bool,
                        password_file: str | None = None) -> None:
        """Claim ``org`` for ``owner`` (``serve``: and route it to the database); raises :class:`OrgNameTaken`."""

    async def release_org(self, org: str, *, owner: str) -> bool:
        """Remove the registration if ``owner`` holds it (never another owner's); returns whether it did."""

    async def ensure_scope(self, database_url: str, *, name: str, description: str, readers: list[str],
                           writers: list[str], retention_days: int | None) -> None:
        """Create or update a scope in the org's database."""

    async def scope_stats(self, database_url: str) -> list[dict[str, Any]]:
        """``[{"name", "facts", "last_write"}]`` for every scope of the org."""

    async def issue_token(self, database_url: str, *, org: str, agent_id: str, read_scopes: list[str],
                          write_scopes: list[str]) -> str:
        """Issue a token for an agent and return it in plain text (only this once)."""

    async def revoke_agent_tokens(self, database_url: str, *, agent_id: str) -> int:
        """Revoke every token of an agent; returns how many were revoked."""

    async def close(self) -> None:
        """Release connections (the operator is stopping)."""


class LiveBackend:
    """The real implementation over ``echo_memory.libs.server.orgs`` (NATS KV) and
    ``echo_memory.libs.server.store.admin`` (Postgres)."""

    def __init__(self, nats_url: str, *, timeout: float = 5.0) -> None:
        self._nats_url = nats_url
        self._timeout = timeout
        self._nc: NATS | None = None
        self._connecting = asyncio.Lock()

    async def _bounded(self, what: str, call: Awaitable[T]) -> T:
        try:
            async with asyncio.timeout(self._timeout):  # not wait_for: on 3.11 it can lose a cancel
                return await call
        except TimeoutError as exc:
            raise BusUnavailable(f"NATS did not answer {what} within {self._timeout:g}s") from exc

    async def _conn(self) -> NATS:
        """The one NATS connection of the process, opened on first use and reconnecting by itself."""
        import nats

        from echo_memory.libs.core.config import load_settings
        from echo_memory.libs.server.bus.auth import connect_options, settings_credentials

        # The admin user's credentials (ECHO_MEMORY_NATS_USER/_PASSWORD, from the chart), replies on its inbox.
        auth = connect_options(settings_credentials(load_settings()))
        async with self._connecting:
            if self._nc is None or self._nc.is_closed:
                self._nc = await self._bounded("a connect", nats.connect(
                    self._nats_url, connect_timeout=self._timeout, max_reconnect_attempts=-1,
                    reconnect_time_wait=1, allow_reconnect=True, name="echo-memory-operator", **auth))
            return self._nc

    async def claim_org(self, org: str, *, owner: str, database_url: str, serve: bool,
                        password_file: str | None = None) -> None:
        """Compare-and-set the org's entry in the ``echo-orgs`` KV bucket."""
        from echo_memory.libs.server.orgs import OrgTaken, claim_org, without_password

        nc = await self._conn()
        try:
            await self._bounded("a registry write", claim_org(nc, org, owner, database_url, serve=serve,
                                                               password_file=password_file))
        except OrgTaken as exc:
            where = without_password(exc.database_url) if exc.database_url else None
            raise OrgNameTaken(org, exc.owner, where) from None

    async def release_org(self, org: str, *, owner: str) -> bool:
        """Delete the org's entry from the ``echo-orgs`` KV bucket if ``owner`` holds it."""
        from echo_memory.libs.server.orgs import release_org

        nc = await self._conn()
        return await self._bounded("a registry delete", release_org(nc, org, owner))

    async def close(self) -> None:
        """Close the NATS connection."""
        if self._nc is not None and not self._nc.is_closed:
            await self._nc.close()
        self._nc = None

    async def ensure_scope(self, database_url: str, *, name: str, description: str, readers: list[str],
                           writers: list[str], retention_days: int | None) -> None:
        """Create or update the scope through ``echo_memory.libs.server.store.admin.ensure_scope``."""
        from echo_memory.libs.server.store import admin

        await asyncio.to_thread(admin.ensure_scope, database_url, name=name, description=description,
                                readers=readers, writers=writers, retention_days=retention_days)

    async def scope_stats(self, database_url: str) -> list[dict[str, Any]]:
        """Per-scope fact counts through ``echo_memory.libs.server.store.admin.scope_stats``."""
        from echo_memory.libs.server.store import admin

        return list(await asyncio.to_thread(admin.scope_stats, database_url))

    async def issue_token(self, database_url: str, *, org: str, agent_id: str, read_scopes: list[str],
                          write_scopes: list[str]) -> str:
        """Issue a token through ``echo_memory.libs.server.store.admin.issue_token``."""
        from echo_memory.libs.server.store import admin

        return str(await asyncio.to_thread(admin.issue_token, database_url, org=org, agent_id=agent_id,
                                           read_scopes=read_scopes, write_scopes=write_scopes))

    async def revoke_agent_tokens(self, database_url: str, *, agent_id: str) -> int:
        """Revoke tokens through ``echo_memory.libs.server.store.admin.revoke_agent_tokens``."""
        from echo_memory.libs.server.store import admin

        return int(await asyncio.to_thread(admin.revoke_agent_tokens, database_url, agent_id=agent_id))
