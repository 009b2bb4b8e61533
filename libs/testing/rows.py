"""Reading what a test wrote: row counts and single statements, on a tier's connection or a database URL."""

from __future__ import annotations

from typing import Any

import psycopg

# Every table the write path touches.
WRITE_TABLES = (
    "entities", "entity_aliases", "episodes", "facts", "audit_log", "outbox", "idempotency",
    "recall_saves", "documents", "document_ingestions",
)
_COUNT_ALL = "SELECT " + ", ".join(f"(SELECT count(*) FROM {t})" for t in WRITE_TABLES)


async def sql(database: str | psycopg.AsyncConnection, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    """The rows of one statement: on the handler tier's own connection (which sees its uncommitted
    rows), or on a new autocommit connection to a database URL."""
    if isinstance(database, psycopg.AsyncConnection):
        cur = await database.execute(query, params)
        return await cur.fetchall() if cur.description else []
    async with await psycopg.AsyncConnection.connect(database, autocommit=True) as conn:
        return await sql(conn, query, params)


async def counts(database: str | psycopg.AsyncConnection) -> dict[str, int]:
    """Rows in every table the write path touches (one round trip)."""
    [row] = await sql(database, _COUNT_ALL)
    return dict(zip(WRITE_TABLES, row, strict=True))
