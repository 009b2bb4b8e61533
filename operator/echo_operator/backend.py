"""What the operator asks of Echo Memory itself (not of Kubernetes).

:class:`Backend` is the seam: registering an org on the bus, creating scopes
and issuing or revoking tokens in an org's database.  :class:`LiveBackend`
calls the project's own ``libs.orgs`` and ``libs.store.admin`` (sync psycopg
calls run in a worker thread so kopf's loop never blocks); tests may pass
another implementation through kopf's memo.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol


class Backend(Protocol):
    """Operations on the Echo Memory side that the reconcilers need."""

    async def register_org(self, org: str, database_url: str) -> None:
        """Make the org reachable by the running services (idempotent)."""

    async def unregister_org(self, org: str) -> None:
        """Stop routing the org (its database is untouched)."""

    async def registered_url(self, org: str) -> str | None:
        """The database URL the bus currently routes ``org`` to, or ``None``."""

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


class LiveBackend:
    """The real implementation over ``libs.orgs`` (NATS KV) and ``libs.store.admin`` (Postgres)."""

    def __init__(self, nats_url: str) -> None:
        self._nats_url = nats_url

    async def register_org(self, org: str, database_url: str) -> None:
        """Put the org in the ``echo-orgs`` KV bucket."""
        from libs.orgs import register_org

        await register_org(self._nats_url, org, database_url)

    async def unregister_org(self, org: str) -> None:
        """Remove the org from the ``echo-orgs`` KV bucket."""
        from libs.orgs import unregister_org

        await unregister_org(self._nats_url, org)

    async def registered_url(self, org: str) -> str | None:
        """Read the org's entry from the ``echo-orgs`` KV bucket."""
        import nats

        from libs.orgs import lookup_org

        client = await nats.connect(self._nats_url)
        try:
            return await lookup_org(client, org)
        finally:
            await client.close()

    async def ensure_scope(self, database_url: str, *, name: str, description: str, readers: list[str],
                           writers: list[str], retention_days: int | None) -> None:
        """Create or update the scope through ``libs.store.admin.ensure_scope``."""
        from libs.store import admin

        await asyncio.to_thread(admin.ensure_scope, database_url, name=name, description=description,
                                readers=readers, writers=writers, retention_days=retention_days)

    async def scope_stats(self, database_url: str) -> list[dict[str, Any]]:
        """Per-scope fact counts through ``libs.store.admin.scope_stats``."""
        from libs.store import admin

        return list(await asyncio.to_thread(admin.scope_stats, database_url))

    async def issue_token(self, database_url: str, *, org: str, agent_id: str, read_scopes: list[str],
                          write_scopes: list[str]) -> str:
        """Issue a token through ``libs.store.admin.issue_token``."""
        from libs.store import admin

        return str(await asyncio.to_thread(admin.issue_token, database_url, org=org, agent_id=agent_id,
                                           read_scopes=read_scopes, write_scopes=write_scopes))

    async def revoke_agent_tokens(self, database_url: str, *, agent_id: str) -> int:
        """Revoke tokens through ``libs.store.admin.revoke_agent_tokens``."""
        from libs.store import admin

        return int(await asyncio.to_thread(admin.revoke_agent_tokens, database_url, agent_id=agent_id))
