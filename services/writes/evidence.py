"""Episode ids a caller names as evidence (write_episode's source_episode_ids, mark_distilled).

An id is accepted only for an episode in a scope the caller may read; any other id is
`not_found`, so ids in scopes the caller cannot see reveal nothing about them.
"""

from __future__ import annotations

import uuid

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound
from echo_memory.libs.server.store.access import accessible_scopes

EPISODES = """
SELECT id, scope_id, kind, metadata ? 'external_id' AS imported FROM episodes WHERE id = ANY(%s::uuid[])
"""


def ids(values: list[str], what: str) -> list[str]:
    """The values as normalised UUID strings, first occurrence order; InvalidArgument naming a malformed one."""
    out = []
    for value in values:
        try:
            out.append(str(uuid.UUID(value)))
        except ValueError:
            raise InvalidArgument(f"{what} '{value[:64]}' is not an id") from None
    return list(dict.fromkeys(out))


async def readable_scope_ids(conn: psycopg.AsyncConnection, caller: Caller) -> set[str]:
    return {s.id for s in await accessible_scopes(conn, caller, "read") if s.id is not None}


async def readable_episodes(
    conn: psycopg.AsyncConnection, caller: Caller, values: list[str], *, imported_only: bool
) -> list[str]:
    """The ids (normalised) when every one is an episode in a scope `caller` may read.

    Raises InvalidArgument for a malformed id, a write's own episode, or (imported_only) an
    episode that is not an imported turn; NotFound for one not in any scope the caller may read.
    """
    wanted = ids(values, "episode id")
    if not wanted:
        return []
    readable = await readable_scope_ids(conn, caller)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(EPISODES, (wanted,))
        rows = {str(r["id"]): r for r in await cur.fetchall()}
    for ident in wanted:
        row = rows.get(ident)
        if row is None or str(row["scope_id"]) not in readable:
            raise NotFound(f"episode {ident} does not exist in any scope you may read")
        if row["kind"] == "write":
            raise InvalidArgument(f"episode {ident} is a write's own record, not evidence to distil")
        if imported_only and not row["imported"]:
            raise InvalidArgument(f"episode {ident} is not an imported turn (pending_episodes lists those)")
    return wanted
