"""Synchronous admin helpers for the CLI's offline paths and the Kubernetes operator.

They talk to one org's database directly (the operator holds its connection Secret), one
transaction per call. The rules and SQL are `echo_memory.libs.server.store.access`'s, shared with the bus verbs.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.server.store import access, tokens
from echo_memory.libs.server.store.schema import apply_migrations, schema_version
from echo_memory.libs.server.store.scopes import SCOPE_STATS

__all__ = [
    "apply_migrations",
    "ensure_scope",
    "issue_token",
    "revoke_agent_tokens",
    "schema_version",
    "scope_stats",
]


def ensure_scope(
    database_url: str,
    *,
    name: str,
    description: str = "",
    readers: list[str] | None = None,
    writers: list[str] | None = None,
    retention_days: int | None = None,
) -> None:
    """Create or update a named scope. `readers`/`writers` default to every agent (`*`).

    Raises:
        InvalidArgument: a builtin or malformed name, or a retention below one day (nothing changes).
    """
    with psycopg.connect(database_url) as conn:
        access.save_scope(conn, name=name, description=description, readers=readers, writers=writers,
                          retention_days=retention_days, replace=True)


def issue_token(
    database_url: str,
    *,
    org: str,
    agent_id: str,
    read_scopes: list[str],
    write_scopes: list[str],
) -> str:
    """Mint a token for `agent_id`, store its hash, and return the token (shown only now).

    Raises:
        InvalidArgument: the reserved admin agent id or a malformed one (nothing is written).
    """
    with psycopg.connect(database_url) as conn:
        return access.issue_token(conn, org=org, agent_id=agent_id, read_scopes=read_scopes,
                                  write_scopes=write_scopes).token


def revoke_agent_tokens(database_url: str, *, agent_id: str) -> int:
    """Revoke every live token of `agent_id`; returns how many were revoked."""
    with psycopg.connect(database_url) as conn:
        return conn.execute(tokens.REVOKE_BY_AGENT, (agent_id,)).rowcount


def scope_stats(database_url: str) -> list[dict[str, Any]]:
    """Facts and last write per scope: [{"name", "facts", "active_facts", "last_write"}]."""
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        return list(conn.execute(SCOPE_STATS).fetchall())
