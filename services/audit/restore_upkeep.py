"""Index and statistics upkeep suspended while a restore fills an empty org.

Row by row, a restored fact costs its HNSW insert and the statistics triggers: about three
quarters of a restore's time at 10k facts. When the org holds no memory yet (nothing anyone reads
can be missing from an index), the restore drops the HNSW indexes and disables the statistics
triggers inside its own transaction, then rebuilds both once at the end. Those DDL statements
lock the tables until commit, which only an empty org can afford; they also need the tables'
owner, so a role that does not own them restores row by row. A failed restore rolls all of it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from echo_memory.libs.server.store.fact_tokens import rebuild_scope_total
from echo_memory.libs.server.store.lexical import rebuild_scope_statistics

TABLES = ("facts", "episodes", "entities")
TRIGGERS = (("facts", "facts_lexical_stats"), ("facts", "facts_tokens_inserted"), ("episodes", "episodes_lexical_stats"))

ORG_HOLDS_MEMORY = """
SELECT EXISTS (SELECT 1 FROM facts) OR EXISTS (SELECT 1 FROM episodes) OR EXISTS (SELECT 1 FROM entities)
"""
OWNS_TABLES = """
SELECT bool_and(pg_has_role(current_user, tableowner, 'USAGE')) FROM pg_tables
WHERE schemaname = current_schema() AND tablename = ANY(%(tables)s)
"""
# The definitions as the database holds them, so they are re-created exactly as the migrations made them.
HNSW_INDEXES = """
SELECT indexname, indexdef FROM pg_indexes
WHERE schemaname = current_schema() AND tablename = ANY(%(tables)s) AND indexdef LIKE '%%USING hnsw%%'
ORDER BY indexname
"""
DROP_INDEX = sql.SQL("DROP INDEX {}")
DISABLE_TRIGGER = sql.SQL("ALTER TABLE {} DISABLE TRIGGER {}")
ENABLE_TRIGGER = sql.SQL("ALTER TABLE {} ENABLE TRIGGER {}")
# An HNSW build that fits in memory is several times faster; the setting ends with the transaction.
BUILD_MEMORY = "SET LOCAL maintenance_work_mem = '256MB'"


@dataclass(frozen=True)
class Suspended:
    """What `suspend` turned off, for `resume` to turn back on."""

    indexes: tuple[tuple[str, str], ...]  # (name, definition)


async def suspend(conn: psycopg.AsyncConnection[Any]) -> Suspended | None:
    """Drop the HNSW indexes and disable the statistics triggers if the org is empty and ours to alter.

    Returns None (nothing changed: restore row by row) when the org already holds memory or the
    connection's role does not own the tables.
    """
    holds = await (await conn.execute(ORG_HOLDS_MEMORY)).fetchone()
    if holds and holds[0]:
        return None
    owns = await (await conn.execute(OWNS_TABLES, {"tables": list(TABLES)})).fetchone()
    if not (owns and owns[0]):
        return None
    indexes = tuple((r[0], r[1]) for r in await (await conn.execute(HNSW_INDEXES, {"tables": list(TABLES)})).fetchall())
    for name, _ in indexes:
        await conn.execute(DROP_INDEX.format(sql.Identifier(name)))
    for table, trigger in TRIGGERS:
        await conn.execute(DISABLE_TRIGGER.format(sql.Identifier(table), sql.Identifier(trigger)))
    return Suspended(indexes=indexes)


async def resume(conn: psycopg.AsyncConnection[Any], suspended: Suspended, scope_ids: list[str]) -> None:
    """Rebuild the restored scopes' statistics and token totals, re-create the indexes and enable the triggers again."""
    for scope_id in scope_ids:
        await rebuild_scope_statistics(conn, scope_id)
        await rebuild_scope_total(conn, scope_id)
    await conn.execute(BUILD_MEMORY)
    for _, definition in suspended.indexes:
        await conn.execute(definition.encode())  # the catalog's own CREATE INDEX text, unchanged
    for table, trigger in TRIGGERS:
        await conn.execute(ENABLE_TRIGGER.format(sql.Identifier(table), sql.Identifier(trigger)))
