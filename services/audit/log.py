"""get_audit_log: filtered, scope-checked, oldest-first pages of the audit log.

Reads only. The caller sees rows of scopes it may read; rows with no scope (org-level document
bookkeeping) are shown only when no scope filter is given and the caller may read `shared`.
Paging is a (created_at, id) keyset in an opaque cursor; `more` is never silently false.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.audit import AUDIT_KINDS, AuditEntry, GetAuditLogInput, GetAuditLogResult
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.core.contracts.instants import parse_span
from echo_memory.libs.server.store.access import SHARED, public_name, resolve_scope
from echo_memory.services.audit import queries as q
from echo_memory.services.audit.access import readable_scopes


async def get_audit_log(conn: psycopg.AsyncConnection, caller: Caller, args: GetAuditLogInput) -> GetAuditLogResult:
    """One page of audit rows, oldest first.

    Returns an empty page (more=false) when nothing matches. Raises InvalidArgument for a bad
    time, kind, fact id or cursor, or since after until; ScopeDenied/NotFound for a scope the
    token may not read or that does not exist.
    """
    # `until` is inclusive of the whole unit it names, so the SQL bound is the instant past it.
    since = parse_span(args.since, "since").start if args.since is not None else None
    until = parse_span(args.until, "until").end if args.until is not None else None
    if since is not None and until is not None and since >= until:
        raise InvalidArgument(f"since ({args.since}) is after until ({args.until})")
    if args.kind is not None and args.kind not in AUDIT_KINDS:
        raise InvalidArgument(f"kind '{args.kind}' is not an audit kind; use one of: {', '.join(AUDIT_KINDS)}")
    fact_id = _uuid(args.fact_id, "fact_id") if args.fact_id is not None else None
    after_t, after_id = decode_cursor(args.cursor) if args.cursor else (None, None)

    if args.scope is not None:
        scope = await resolve_scope(conn, caller, args.scope, "read")
        scope_ids = [scope.id] if scope.id else []
        names = [scope.name]
        unscoped = False
    else:
        readable = await readable_scopes(conn, caller)
        scope_ids = [s.id for s in readable if s.id is not None]
        names = [s.name for s in readable]
        unscoped = SHARED in names
    params: dict[str, Any] = {
        "scope_ids": scope_ids, "unscoped": unscoped, "since": since, "until": until, "agent": args.agent,
        "kind": args.kind, "fact_id": fact_id, "after_t": after_t, "after_id": after_id, "limit": args.limit + 1,
    }
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.AUDIT_PAGE, params)
        rows = await cur.fetchall()
    more = len(rows) > args.limit
    entries = [entry_from_row(r) for r in rows[: args.limit]]
    cursor = encode_cursor(entries[-1].created_at, entries[-1].id) if more else None
    return GetAuditLogResult(entries=entries, more=more, next_cursor=cursor, scopes=names)


def entry_from_row(row: dict[str, Any]) -> AuditEntry:
    scope = row["scope_name"]
    return AuditEntry(
        id=row["id"], kind=row["kind"], scope=public_name(scope) if scope else scope,
        agent_id=row["agent_id"], session_id=row["session_id"], tool=row["tool"],
        fact_id=str(row["fact_id"]) if row["fact_id"] else None,
        entity_id=str(row["entity_id"]) if row["entity_id"] else None,
        before=row["before"], after=row["after"], reason=row["reason"], post_hoc=row["post_hoc"],
        created_at=row["created_at"],
    )


def encode_cursor(created_at: datetime, row_id: int) -> str:
    raw = json.dumps({"t": created_at.isoformat(), "i": row_id}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return datetime.fromisoformat(data["t"]), int(data["i"])
    except (ValueError, KeyError, TypeError):
        raise InvalidArgument("cursor is not a next_cursor this tool returned") from None


def _uuid(value: str, name: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise InvalidArgument(f"{name} '{value[:64]}' is not a fact id (a UUID)") from None
