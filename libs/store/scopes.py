"""Which scope a request may touch, decided by the server from the token, never by the caller.

`shared` is every agent's; `solo` is stored per agent as `solo:<agent_id>`; any other name is a
named scope that must exist and list the agent (or `*`) among its readers or writers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import psycopg
from psycopg.rows import dict_row

from libs.contracts.bus import Caller
from libs.contracts.errors import InvalidArgument, NotFound, ScopeDenied

Mode = Literal["read", "write"]

# Serialises every change to one scope for the rest of the transaction (released at commit, so it
# also holds behind a transaction-pooling proxy). Writes, imports and reindex all take it.
SCOPE_WRITE_LOCK = "SELECT pg_advisory_xact_lock(hashtext('echo-memory:scope:' || %s::text))"

# Facts per scope (all versions and the active ones) and the last write: `echo-memory status` and
# the operator's MemoryScope status both report it.
SCOPE_STATS = """
SELECT s.name,
       count(f.id) AS facts,
       count(f.id) FILTER (WHERE f.t_invalid IS NULL) AS active_facts,
       max(f.written_at) AS last_write
FROM scopes s LEFT JOIN facts f ON f.scope_id = s.id
GROUP BY s.name ORDER BY s.name
"""

SELECT_SCOPE = """
SELECT id, name, kind, owner_agent, readers, writers FROM scopes WHERE name = %s
"""
INSERT_SOLO = """
INSERT INTO scopes (name, kind, owner_agent, description, readers, writers)
VALUES (%s, 'solo', %s, 'Private memory of one agent.', ARRAY[%s], ARRAY[%s])
ON CONFLICT (name) DO NOTHING
"""


@dataclass(frozen=True)
class Scope:
    id: str | None  # None: a solo scope nobody has written to yet (reads find nothing)
    name: str  # the name the caller uses: shared, solo, team-a
    stored_name: str  # the row's name: solo becomes solo:<agent>


def public_name(stored: str) -> str:
    """The name callers use for a stored scope row: every `solo:<agent>` is just `solo` to its owner."""
    return "solo" if stored.startswith("solo:") else stored


def stored_name(caller: Caller, name: str) -> str:
    return f"solo:{caller.agent_id}" if name == "solo" else name


def _granted(caller: Caller, name: str, mode: Mode) -> bool:
    granted = caller.read_scopes if mode == "read" else caller.write_scopes
    return "*" in granted or name in granted


async def resolve_scope(
    conn: psycopg.AsyncConnection, caller: Caller, requested: str | None, mode: Mode
) -> Scope:
    """The scope row a request may use, or a typed error naming the scope.

    Raises:
        ScopeDenied: the token does not grant `mode` on that scope, or the scope's own
            reader/writer list excludes the agent.
        NotFound: a named scope that does not exist.
    """
    name = (requested or "shared").strip()
    if not name or name.startswith("solo:"):
        raise InvalidArgument(f"scope {name!r} is not a valid scope name")
    if not _granted(caller, name, mode):
        allowed = caller.read_scopes if mode == "read" else caller.write_scopes
        raise ScopeDenied(
            f"this token may not {mode} scope '{name}' (it may {mode}: {', '.join(allowed) or 'nothing'})"
        )
    row_name = stored_name(caller, name)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(SELECT_SCOPE, (row_name,))
        row = await cur.fetchone()
        if row is None and name == "solo":
            if mode == "read":
                return Scope(id=None, name=name, stored_name=row_name)
            await cur.execute(INSERT_SOLO, (row_name, caller.agent_id, caller.agent_id, caller.agent_id))
            await cur.execute(SELECT_SCOPE, (row_name,))
            row = await cur.fetchone()
    if row is None:
        raise NotFound(f"scope '{name}' does not exist; create it with `echo-memory scope create {name}`")
    members = row["readers"] if mode == "read" else row["writers"]
    if "*" not in members and caller.agent_id not in members:
        raise ScopeDenied(f"agent '{caller.agent_id}' is not among the {mode}rs of scope '{name}'")
    return Scope(id=str(row["id"]), name=name, stored_name=row_name)


async def resolve_read_scopes(
    conn: psycopg.AsyncConnection, caller: Caller, requested: str | list[str] | None
) -> list[Scope]:
    """Every scope a read names (default: shared), each checked as in `resolve_scope`."""
    names = [requested] if requested is None or isinstance(requested, str) else requested
    if isinstance(requested, list) and not requested:
        raise InvalidArgument("scope must name at least one scope when given as a list")
    if len(names) > 20:
        raise InvalidArgument("at most 20 scopes may be read at once")
    scopes: list[Scope] = []
    for name in dict.fromkeys(names):
        scopes.append(await resolve_scope(conn, caller, name, "read"))
    return scopes
