"""Which scopes a caller may read, for verbs that span every readable scope (audit log, why).

The same rule as `libs.store.scopes.resolve_scope`, applied to every scope at once: the token
must grant the scope's public name (or `*`), and the scope's readers must list the agent (or `*`).
A solo scope is readable only by its owner, as `solo`. Export and import are org-wide admin
verbs and use `require_admin` instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row

from libs.contracts.bus import Caller
from libs.contracts.errors import ScopeDenied
from services.audit import queries as q


@dataclass(frozen=True)
class ScopeRow:
    id: str
    name: str  # stored name (solo:<agent> for solo scopes)
    public: str  # what the caller calls it


async def readable_scopes(conn: psycopg.AsyncConnection, caller: Caller) -> list[ScopeRow]:
    """Every scope `caller` may read, oldest first (empty when it may read none)."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.ALL_SCOPES)
        rows = await cur.fetchall()
    granted = set(caller.read_scopes)
    out: list[ScopeRow] = []
    for row in rows:
        name: str = row["name"]
        if name.startswith("solo:"):
            if name != f"solo:{caller.agent_id}":
                continue
            public = "solo"
        else:
            public = name
        if "*" not in granted and public not in granted:
            continue
        if "*" not in row["readers"] and caller.agent_id not in row["readers"]:
            continue
        out.append(ScopeRow(id=str(row["id"]), name=name, public=public))
    return out


def require_admin(caller: Caller, verb: str) -> None:
    """Export and import move a whole org's memory, so only an identity granted every scope may."""
    if "*" not in caller.read_scopes or "*" not in caller.write_scopes:
        raise ScopeDenied(f"{verb} needs an admin identity (read and write on every scope); use the echo-memory CLI")
