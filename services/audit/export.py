"""export: the org (or one scope) as versioned records, one page per request.

Reads only. The first page fixes a `cutoff` (the transaction time) and carries the header with
the number of records each section will hold; the cursor carries the cutoff, the section and the
keyset, so the CLI can stream any size of store and show progress. A page is bounded in encoded
bytes (`max_bytes`), never above what one bus message carries: a record that would pass the budget
starts the next page, and a record larger than the budget travels alone. Embeddings travel as
base64 float32 so an import needs no model and restores them bit for bit. `resume` continues a
file cut short: the keyset is rebuilt from the file's cutoff and its last complete record.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg
from pgvector import Vector
from psycopg.rows import dict_row
from pydantic import TypeAdapter, ValidationError

from echo_memory.libs.core.contracts.audit import (
    EXPORT_VERSION,
    MAX_EXPORT_PAGE_BYTES,
    SECTIONS,
    ExportHeader,
    ExportInput,
    ExportPage,
    ExportRecord,
    ExportResume,
)
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import Internal, InvalidArgument, NotFound
from echo_memory.libs.server.store.schema import read_version_async
from echo_memory.services.audit import export_queries as xq
from echo_memory.services.audit import queries as q
from echo_memory.services.audit.access import require_admin

_RECORD: TypeAdapter[Any] = TypeAdapter(ExportRecord)
_KEYS = ("k1", "k2", "k3")
# Rows fetched per query: enough to fill a page of small records in one round trip, few enough
# that the rows a full page leaves behind (fetched again by the next page) cost little.
_FIRST_FETCH = 64
_MAX_FETCH = 1000


async def export_page(conn: psycopg.AsyncConnection, caller: Caller, args: ExportInput) -> ExportPage:
    """The next page of records; `header` on the first page, `next_cursor` null on the last.

    The page's records encode to at most `args.max_bytes` bytes, except a single record larger
    than that, which comes alone. A resumed export (`args.resume`) starts after the given record
    and carries no header; its records are empty when the file only lacked its end line.

    Raises ScopeDenied unless the caller is the org admin; NotFound for an unknown scope;
    InvalidArgument for a cursor that is malformed or belongs to another scope's export, or a
    resume record that is not an export record; Internal naming a record that encodes to more
    than one bus message can carry.
    """
    require_admin(caller, "export")
    if args.cursor and args.resume:
        raise InvalidArgument("pass either cursor or resume, not both")
    if args.cursor:
        cutoff, section, key, scope_name = _decode(args.cursor)
        if scope_name != args.scope:
            raise InvalidArgument("this cursor belongs to an export of another scope; pass the same scope")
    elif args.resume:
        cutoff, scope_name = args.resume.cutoff, args.scope
        section, key = await _resume_point(conn, args.resume)
    else:
        cutoff = (await (await conn.execute(xq.TRANSACTION_NOW)).fetchone())[0]  # type: ignore[index]
        section, key, scope_name = 0, None, args.scope
    params = await _params(conn, scope_name, cutoff)
    header = None
    records: list[Any] = []
    used = 0  # encoded bytes of `records`, each with its separating comma
    full = False
    async with conn.cursor(row_factory=dict_row) as cur:
        if not args.cursor and not args.resume:
            header = await _header(conn, cur, caller, scope_name, cutoff, params)
        while section < len(SECTIONS) and not full:
            want = min(args.limit - len(records), _fetch_size(used, len(records), args.max_bytes))
            keys = dict(zip(_KEYS, key or [], strict=False))
            await cur.execute(xq.SECTION_SQL[SECTIONS[section]],
                              {**params, "first": key is None, **dict.fromkeys(_KEYS), **keys, "limit": want})
            rows = await cur.fetchall()
            for row in rows:
                record = _record(SECTIONS[section], row)
                size = len(_RECORD.dump_json(record)) + 1
                if used + size > args.max_bytes and records:
                    full = True  # this record starts the next page
                    break
                if size > MAX_EXPORT_PAGE_BYTES:
                    raise Internal(f"export cannot send {_name(record)}: it encodes to {size} bytes, more than one "
                                   f"bus message carries ({MAX_EXPORT_PAGE_BYTES} bytes)")
                records.append(record)
                used += size
                key = [_plain(row[k]) for k in _KEYS if k in row]
                if used >= args.max_bytes or len(records) >= args.limit:
                    full = True
                    break
            if not full and len(rows) < want:
                section, key = section + 1, None
    done = section >= len(SECTIONS)
    return ExportPage(header=header, records=records,
                      next_cursor=None if done else _encode(cutoff, section, key, scope_name))


def _fetch_size(used: int, count: int, budget: int) -> int:
    """Rows to ask for: as many as the rest of the budget holds at this page's mean record size."""
    if count == 0:
        return _FIRST_FETCH
    return max(1, min(_MAX_FETCH, (budget - used) * count // used + 1))


async def _header(conn: psycopg.AsyncConnection, cur: psycopg.AsyncCursor[Any], caller: Caller,
                  scope_name: str | None, cutoff: datetime, params: dict[str, Any]) -> ExportHeader:
    counts = {}
    for name in SECTIONS:
        await cur.execute(xq.SECTION_COUNT[name], {**params, "first": True, **dict.fromkeys(_KEYS)})
        row = await cur.fetchone()
        counts[name] = int(row["count"]) if row else 0
    return ExportHeader(
        version=EXPORT_VERSION, schema_version=await read_version_async(conn), org=caller.org,
        scope=scope_name, exported_at=datetime.now(tz=UTC), cutoff=cutoff, counts=counts,
    )


async def _resume_point(conn: psycopg.AsyncConnection, resume: ExportResume) -> tuple[int, list[Any] | None]:
    """(section, keyset) just after the file's last record; the start of the first section without one."""
    if resume.after is None:
        return 0, None
    try:
        record = _RECORD.validate_python(resume.after)
    except ValidationError:
        raise InvalidArgument("resume.after is not a record of an export file") from None
    key = [_plain(getattr(record, name)) for name in xq.RESUME_KEY_FIELDS[record.type]]
    if record.type == "read_result":
        row = await (await conn.execute(xq.READ_CREATED_AT, {"id": record.read_id})).fetchone()
        if row is None:
            raise InvalidArgument(f"resume.after names read {record.read_id}, which this org does not hold")
        key = [_plain(row[0]), *key]
    return SECTIONS.index(record.type), key


def _name(record: Any) -> str:
    """The record as a person can look it up: its type and id (or the ids that key it)."""
    fields = ("id",) if hasattr(record, "id") else xq.RESUME_KEY_FIELDS[record.type][-2:]
    return f"{record.type} {'/'.join(str(getattr(record, f)) for f in fields)}"


async def _params(conn: psycopg.AsyncConnection, scope_name: str | None, cutoff: datetime) -> dict[str, Any]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.ALL_SCOPES)
        scopes = [r for r in await cur.fetchall() if r["created_at"] <= cutoff]
    if scope_name is not None:
        scopes = [r for r in scopes if r["name"] == scope_name]
        if not scopes:
            raise NotFound(f"scope '{scope_name}' does not exist (solo scopes are named solo:<agent>)")
    return {"scope_ids": [r["id"] for r in scopes], "scope_names": [r["name"] for r in scopes],
            "full": scope_name is None, "cutoff": cutoff}


def _record(section: str, row: dict[str, Any]) -> Any:
    data = {k: _plain(v) for k, v in row.items() if k not in _KEYS}
    return _RECORD.validate_python({"type": section, **data})


def _plain(value: Any) -> Any:
    """Database values as JSON-ready values: ids as strings, vectors as base64 float32."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Vector):
        value = value.to_numpy()
    if isinstance(value, np.ndarray):
        return base64.b64encode(value.astype("<f4").tobytes()).decode()
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _encode(cutoff: datetime, section: int, key: list[Any] | None, scope: str | None) -> str:
    raw = json.dumps({"c": cutoff.isoformat(), "s": section, "k": key, "scope": scope}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode(cursor: str) -> tuple[datetime, int, list[Any] | None, str | None]:
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        section = int(data["s"])
        if not 0 <= section <= len(SECTIONS):
            raise ValueError(section)
        key = data["k"]
        if key is not None and not (isinstance(key, list) and 1 <= len(key) <= 3):
            raise ValueError(key)
        return datetime.fromisoformat(data["c"]), section, key, data["scope"]
    except (ValueError, KeyError, TypeError):
        raise InvalidArgument("cursor is not a next_cursor this export returned") from None
