"""Helpers for the erasure tests: a unique marker, a byte-for-byte search of every table, a content hash."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import psycopg
from psycopg import sql

# Every column whose values can hold text: text and varchar, json and jsonb, arrays, tsvectors.
TEXT_COLUMNS = """
SELECT c.table_name, c.column_name FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
  AND (c.data_type IN ('text', 'character varying', 'json', 'jsonb', 'ARRAY', 'tsvector', 'bytea')
       OR c.udt_name = 'tsvector')
ORDER BY c.table_name, c.column_name
"""
TABLES = """
SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'
ORDER BY table_name
"""


def new_marker() -> str:
    """A token no text holds by chance; lowercase letters and digits, so a tsvector keeps it whole."""
    return "zqv" + uuid.uuid4().hex[:12] + "x"


async def marker_hits(conn: psycopg.AsyncConnection, marker: str) -> dict[str, int]:
    """{table.column: rows whose value holds `marker`} over every text-like column of every table."""
    hits: dict[str, int] = {}
    columns = await (await conn.execute(TEXT_COLUMNS)).fetchall()
    assert len(columns) > 30  # the scan saw the schema, so an empty answer means something
    for table, column in columns:
        query = sql.SQL("SELECT count(*) FROM {} WHERE strpos(lower({}::text), %s) > 0").format(
            sql.Identifier(table), sql.Identifier(column))
        row = await (await conn.execute(query, (marker.lower(),))).fetchone()
        if row and row[0]:
            hits[f"{table}.{column}"] = row[0]
    return hits


async def content_hash(conn: psycopg.AsyncConnection) -> tuple[dict[str, int], str]:
    """Row counts of every table and one hash over every row of every table (in a stable order)."""
    digest = hashlib.sha256()
    counts: dict[str, int] = {}
    for (table,) in await (await conn.execute(TABLES)).fetchall():
        query = sql.SQL("SELECT t::text FROM {} AS t ORDER BY 1").format(sql.Identifier(table))
        rows = await (await conn.execute(query)).fetchall()
        counts[table] = len(rows)
        for (text,) in rows:
            digest.update(text.encode())
    return counts, digest.hexdigest()


def fact(source: str, target: str, relation: str, text: str) -> dict[str, Any]:
    return {"source": source, "target": target, "relation": relation, "fact": text, "confidence": "extracted"}


def episode(entities: list[Any], facts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    ents = [e if isinstance(e, dict) else {"name": e[0], "type": e[1]} for e in entities]
    return {"session_id": "s-1", "project": "ops", "entities": ents, "facts": facts, **extra}
