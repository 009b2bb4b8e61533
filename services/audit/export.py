"""export: the org (or one scope) as versioned records, one page per request.

Reads only. The first page fixes a `cutoff` (the transaction time) and carries the header with
the number of records each section will hold; the cursor carries the cutoff, the section and the
keyset, so the CLI can stream any size of store in bounded pages and show progress. Embeddings
travel as base64 float32 so an import needs no model and restores them bit for bit.
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
from pydantic import TypeAdapter

from libs.contracts.audit import EXPORT_VERSION, SECTIONS, ExportHeader, ExportInput, ExportPage, ExportRecord
from libs.contracts.bus import Caller
from libs.contracts.errors import InvalidArgument, NotFound
from libs.store.schema import read_version_async
from services.audit import export_queries as xq
from services.audit import queries as q
from services.audit.access import require_admin

_RECORD: TypeAdapter[Any] = TypeAdapter(ExportRecord)
_KEYS = ("k1", "k2", "k3")


async def export_page(conn: psycopg.AsyncConnection, caller: Caller, args: ExportInput) -> ExportPage:
    """The next page of records; `header` on the first page, `next_cursor` null on the last.

    Raises ScopeDenied unless the caller is the org admin; NotFound for an unknown scope;
    InvalidArgument for a cursor that is malformed or belongs to another scope's export.
    """
    require_admin(caller, "export")
    if args.cursor:
        cutoff, section, key, scope_name = _decode(args.cursor)
        if scope_name != args.scope:
            raise InvalidArgument("this cursor belongs to an export of another scope; pass the same scope")
    else:
        cutoff = (await (await conn.execute(xq.TRANSACTION_NOW)).fetchone())[0]  # type: ignore[index]
        section, key, scope_name = 0, None, args.scope
    params = await _params(conn, scope_name, cutoff)
    header = None
    async with conn.cursor(row_factory=dict_row) as cur:
        if not args.cursor:
            counts = {}
            for name in SECTIONS:
                await cur.execute(xq.SECTION_COUNT[name], {**params, "first": True, **dict.fromkeys(_KEYS)})
                row = await cur.fetchone()
                counts[name] = int(row["count"]) if row else 0
            header = ExportHeader(
                version=EXPORT_VERSION, schema_version=await read_version_async(conn), org=caller.org,
                scope=scope_name, exported_at=datetime.now(tz=UTC), cutoff=cutoff, counts=counts,
            )
        records: list[Any] = []
        while section < len(SECTIONS) and len(records) < args.limit:
            want = args.limit - len(records)
            keys = dict(zip(_KEYS, key or [], strict=False))
            await cur.execute(xq.SECTION_SQL[SECTIONS[section]],
                              {**params, "first": key is None, **dict.fromkeys(_KEYS), **keys, "limit": want})
            rows = await cur.fetchall()
            records += [_record(SECTIONS[section], r) for r in rows]
            if len(rows) < want:
                section, key = section + 1, None
            else:
                key = [_plain(rows[-1][k]) for k in _KEYS if k in rows[-1]]
    done = section >= len(SECTIONS)
    return ExportPage(header=header, records=records,
                      next_cursor=None if done else _encode(cutoff, section, key, scope_name))


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
