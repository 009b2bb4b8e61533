"""record_recall_save: credit a recalled fact that helped, only if a logged read returned it.

A save needs evidence: some `reads` row (written by query_memory in the same request as the read)
whose `read_results` include the fact. With a `read_id`, that read must be the one. The fact's
scope must be readable by the caller (another agent's solo fact is "not found", so its existence
does not leak). Saving the same (fact, read, agent, note) twice stores it once.

Owned here: `recall_saves` rows and their `recall_saved` audit row and `recall.saved` event.
"""

from __future__ import annotations

import uuid

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.documents import RecordRecallSaveInput, RecordRecallSaveResult
from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound
from echo_memory.libs.core.secrets import find_secret
from echo_memory.libs.server.store.access import SOLO, Scope, resolve_scope
from echo_memory.services.writes import queries as q
from echo_memory.services.writes.episode import AuditEntry, audit, emit

# Looked up by primary key to learn the fact's scope, which is then checked against the caller.
FACT_WITH_SCOPE = """
SELECT f.id, f.scope_id, s.name AS scope_name, s.kind AS scope_kind, s.owner_agent
FROM facts f JOIN scopes s ON s.id = f.scope_id
WHERE f.id = %s
"""
READ_EXISTS = "SELECT id FROM reads WHERE id = %s"
READ_RETURNED = """
SELECT 1 FROM read_results WHERE read_id = %s AND item_id = %s AND item_kind = 'fact'
"""
# Without a read_id, credit the caller's own latest read of the fact, else anyone's latest.
LATEST_READ_OF = """
SELECT r.id FROM read_results rr JOIN reads r ON r.id = rr.read_id
WHERE rr.item_id = %(fact_id)s AND rr.item_kind = 'fact'
ORDER BY (r.agent_id = %(agent_id)s) DESC, r.created_at DESC, r.id
LIMIT 1
"""
SAME_SAVE = """
SELECT id FROM recall_saves
WHERE fact_id = %(fact_id)s AND read_id IS NOT DISTINCT FROM %(read_id)s AND agent_id = %(agent_id)s
  AND note = %(note)s
"""
INSERT_SAVE = """
INSERT INTO recall_saves (fact_id, read_id, agent_id, note)
VALUES (%(fact_id)s, %(read_id)s, %(agent_id)s, %(note)s) RETURNING id
"""


def _uuid(value: str, what: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise InvalidArgument(f"{what} '{value[:64]}' is not an id returned by query_memory") from None


async def record_recall_save(
    conn: psycopg.AsyncConnection, caller: Caller, args: RecordRecallSaveInput
) -> RecordRecallSaveResult:
    """Store the save, or raise: NotFound (unknown/unreadable fact, unknown read), InvalidArgument
    (no logged read returned the fact, the given read did not return it, a secret in the note)."""
    fact_id = _uuid(args.fact_id, "fact_id")
    read_id = _uuid(args.read_id, "read_id") if args.read_id else None
    kind = find_secret(args.note)
    if kind:
        raise InvalidArgument(f"note contains {kind}; secrets are never stored")
    scope = await _readable_fact_scope(conn, caller, fact_id)
    await conn.execute(q.SCOPE_WRITE_LOCK, (scope.id,))  # one save per (fact, read, note) under retries

    if read_id is not None:
        if await (await conn.execute(READ_EXISTS, (read_id,))).fetchone() is None:
            raise NotFound(f"read {read_id} does not exist; use the read_id query_memory returned")
        if await (await conn.execute(READ_RETURNED, (read_id, fact_id))).fetchone() is None:
            raise InvalidArgument(f"read {read_id} did not return fact {fact_id}; credit the read that did")
    else:
        row = await (await conn.execute(LATEST_READ_OF, {"fact_id": fact_id, "agent_id": caller.agent_id})).fetchone()
        if row is None:
            raise InvalidArgument(
                f"no logged read returned fact {fact_id}; only facts query_memory returned can be credited"
            )
        read_id = str(row[0])

    params = {"fact_id": fact_id, "read_id": read_id, "agent_id": caller.agent_id, "note": args.note}
    existing = await (await conn.execute(SAME_SAVE, params)).fetchone()
    if existing is not None:
        return RecordRecallSaveResult(save_id=str(existing[0]), fact_id=fact_id, read_id=read_id, already=True)
    save_id = str((await (await conn.execute(INSERT_SAVE, params)).fetchone())[0])  # type: ignore[index]
    await audit(conn, AuditEntry(
        caller, scope, kind="recall_saved", fact_id=fact_id,
        after={"save_id": save_id, "read_id": read_id, "note": args.note},
        reason=f"{caller.agent_id} said a recalled fact helped: {args.note}"))
    await emit(conn, caller, "recall.saved",
               {"save_id": save_id, "fact_id": fact_id, "read_id": read_id, "scope_id": scope.id,
                "agent_id": caller.agent_id})
    return RecordRecallSaveResult(save_id=save_id, fact_id=fact_id, read_id=read_id)


async def _readable_fact_scope(conn: psycopg.AsyncConnection, caller: Caller, fact_id: str) -> Scope:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(FACT_WITH_SCOPE, (fact_id,))
        row = await cur.fetchone()
    missing = NotFound(f"fact {fact_id} does not exist in a scope you may read")
    if row is None:
        raise missing
    if row["scope_kind"] == SOLO:
        if row["owner_agent"] != caller.agent_id:
            raise missing
        name = SOLO
    else:
        name = row["scope_name"]
    scope = await resolve_scope(conn, caller, name, "read")
    if scope.id != str(row["scope_id"]):
        raise missing
    return scope
