"""Synchronous admin helpers for the CLI's offline paths and the Kubernetes operator.

They talk to one org's database directly (the operator holds its connection Secret). Services
never import this module: they go through their own async store code.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from libs.store import tokens
from libs.store.scopes import SCOPE_STATS
from libs.store.schema import apply_migrations, schema_version

__all__ = [
    "apply_migrations",
    "ensure_scope",
    "issue_token",
    "revoke_agent_tokens",
    "schema_version",
    "scope_stats",
]

UPSERT_SCOPE = """
INSERT INTO scopes (name, kind, description, readers, writers, retention_days)
VALUES (%s, 'named', %s, %s, %s, %s)
ON CONFLICT (name) DO UPDATE
SET description = EXCLUDED.description, readers = EXCLUDED.readers,
    writers = EXCLUDED.writers, retention_days = EXCLUDED.retention_days
WHERE scopes.kind = 'named'
"""


def ensure_scope(
    database_url: str,
    *,
    name: str,
    description: str = "",
    readers: list[str] | None = None,
    writers: list[str] | None = None,
    retention_days: int | None = None,
) -> None:
    """Create or update a named scope. `readers`/`writers` default to every agent (`*`)."""
    if name in ("shared", "solo") or name.startswith("solo:"):
        raise ValueError(f"'{name}' is a built-in scope and cannot be declared")
    with psycopg.connect(database_url) as conn:
        conn.execute(
            UPSERT_SCOPE,
            (name, description, readers or ["*"], writers or ["*"], retention_days),
        )


def issue_token(
    database_url: str,
    *,
    org: str,
    agent_id: str,
    read_scopes: list[str],
    write_scopes: list[str],
) -> str:
    """Mint a token for `agent_id`, store its hash, and return the token (shown only now)."""
    token = tokens.mint(org)
    with psycopg.connect(database_url) as conn:
        conn.execute(tokens.UPSERT_AGENT, (agent_id,))
        conn.execute(
            tokens.INSERT_TOKEN,
            (tokens.hash_token(token), tokens.display_prefix(token), agent_id, read_scopes, write_scopes),
        )
    return token


def revoke_agent_tokens(database_url: str, *, agent_id: str) -> int:
    """Revoke every live token of `agent_id`; returns how many were revoked."""
    with psycopg.connect(database_url) as conn:
        return conn.execute(tokens.REVOKE_BY_AGENT, (agent_id,)).rowcount


def scope_stats(database_url: str) -> list[dict[str, Any]]:
    """Facts and last write per scope: [{"name", "facts", "active_facts", "last_write"}]."""
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        return list(conn.execute(SCOPE_STATS).fetchall())
