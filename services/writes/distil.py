"""pending_episodes, mark_distilled, and the check of write_episode's `source_episode_ids`.

Imported turns are episodes whose metadata names a `source` and `external_id` (batch_import.py).
One is pending until any agent marks it distilled: the turn is evidence for everyone who reads
its scope, so the facts it yields are written once, not once per agent. An episode id is only
ever accepted when it lies in a scope the caller may read; any other id is `not_found`, so ids
in scopes the caller cannot see reveal nothing.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.distil import (
    PENDING_EPISODE_BYTES,
    MarkDistilledInput,
    MarkDistilledResult,
    PendingEpisode,
    PendingEpisodesInput,
    PendingEpisodesResult,
)
from echo_memory.libs.core.contracts.errors import NotFound
from echo_memory.libs.server.store.access import accessible_scopes, resolve_scope
from echo_memory.services.writes.cursors import make_cursor, read_cursor
from echo_memory.services.writes.episode import AuditEntry, audit
from echo_memory.services.writes.evidence import ids, readable_episodes, readable_scope_ids

PENDING = """
SELECT e.id, e.scope_id, e.agent_id, e.project, e.session_id, e.occurred_at, e.content, e.flags,
       e.metadata->>'source' AS source, coalesce(e.occurred_at, e.written_at) AS k1
FROM episodes e
WHERE e.scope_id = ANY(%(scope_ids)s::uuid[]) AND e.metadata ? 'external_id'
  AND NOT EXISTS (SELECT 1 FROM episode_distillations d WHERE d.episode_id = e.id)
  AND (%(project)s::text IS NULL OR e.project = %(project)s::text)
  AND (%(source)s::text IS NULL OR e.metadata->>'source' = %(source)s::text)
  AND (%(first)s OR (coalesce(e.occurred_at, e.written_at), e.id) > (%(k1)s::timestamptz, %(k2)s::uuid))
ORDER BY coalesce(e.occurred_at, e.written_at), e.id
LIMIT %(limit)s
"""
FACTS = "SELECT id, scope_id FROM facts WHERE id = ANY(%s::uuid[])"
RECORD = """
INSERT INTO episode_distillations (episode_id, agent_id, fact_ids, note)
SELECT unnest(%(ids)s::uuid[]), %(agent_id)s, %(fact_ids)s::uuid[], %(note)s
ON CONFLICT (episode_id) DO NOTHING
RETURNING episode_id
"""


async def pending_episodes(
    conn: psycopg.AsyncConnection, caller: Caller, args: PendingEpisodesInput
) -> PendingEpisodesResult:
    """Imported turns nobody has distilled yet, oldest first, in pages; an empty list when none.

    Raises ScopeDenied or NotFound for a `scope` the caller may not read, InvalidArgument for a
    cursor this verb did not return.
    """
    if args.scope is not None:
        scopes = {s.id: s for s in [await resolve_scope(conn, caller, args.scope, "read")] if s.id is not None}
    else:
        scopes = {s.id: s for s in await accessible_scopes(conn, caller, "read") if s.id is not None}
    k1, k2 = read_cursor(args.cursor, "pending_episodes")
    if not scopes:
        return PendingEpisodesResult(episodes=[])
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(PENDING, {"scope_ids": list(scopes), "project": args.project, "source": args.source,
                                    "first": k1 is None, "k1": k1, "k2": k2, "limit": args.limit + 1})
        rows: list[dict[str, Any]] = await cur.fetchall()
    episodes: list[PendingEpisode] = []
    spent = 0
    for row in rows[: args.limit]:
        size = len(row["content"].encode("utf-8"))
        if episodes and spent + size > PENDING_EPISODE_BYTES:
            break
        spent += size
        episodes.append(PendingEpisode(
            episode_id=str(row["id"]), scope=scopes[str(row["scope_id"])].name, source=row["source"],
            agent_id=row["agent_id"], project=row["project"], session_id=row["session_id"],
            occurred_at=row["occurred_at"], content=row["content"], flags=list(row["flags"] or [])))
    more = len(rows) > len(episodes)
    last = rows[len(episodes) - 1] if episodes else None
    cursor = make_cursor(last["k1"], last["id"]) if more and last is not None else None
    return PendingEpisodesResult(episodes=episodes, next_cursor=cursor)


async def mark_distilled(
    conn: psycopg.AsyncConnection, caller: Caller, args: MarkDistilledInput
) -> MarkDistilledResult:
    """Mark imported turns done, naming the facts written from them; changes nothing on any error.

    Raises InvalidArgument (a malformed id, an episode that is not an imported turn), NotFound (an
    episode or fact that is not in a scope the caller may read).
    """
    episode_ids = await readable_episodes(conn, caller, args.episode_ids, imported_only=True)
    fact_ids = ids(args.fact_ids, "fact id")
    if fact_ids:
        readable = await readable_scope_ids(conn, caller)
        found = {str(r[0]): str(r[1]) for r in await (await conn.execute(FACTS, (fact_ids,))).fetchall()}
        for ident in fact_ids:
            if found.get(ident) not in readable:
                raise NotFound(f"fact {ident} does not exist in any scope you may read")
    rows = await (await conn.execute(RECORD, {"ids": episode_ids, "agent_id": caller.agent_id, "fact_ids": fact_ids,
                                              "note": args.note})).fetchall()
    marked = [str(r[0]) for r in rows]
    already = [i for i in episode_ids if i not in set(marked)]
    if marked:
        await audit(conn, AuditEntry(
            caller, None, kind="episode_distilled",
            after={"episode_ids": marked, "fact_ids": fact_ids, "note": args.note},
            reason=f"{caller.agent_id} distilled {len(marked)} imported turn(s) into {len(fact_ids)} fact(s)"))
    return MarkDistilledResult(marked=marked, already=already)
