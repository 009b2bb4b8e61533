"""Applying migrations and checking that a database's schema matches this code."""

from __future__ import annotations

import psycopg

from echo_memory.libs.core.contracts.errors import SchemaTooNew, SchemaTooOld
from echo_memory.libs.server.store.migrations import CODE_SCHEMA_VERSION, all_migrations

CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
# Two `init-db` runs at once (two migration Jobs, two laptops' CLIs) must not both apply a file.
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(hashtext('echo-memory:migrations'))"
APPLIED_VERSIONS = "SELECT version FROM schema_migrations ORDER BY version"
RECORD_MIGRATION = "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)"
CURRENT_VERSION = """
SELECT coalesce(max(version), 0) FROM schema_migrations
"""
HAS_MIGRATIONS_TABLE = "SELECT to_regclass('public.schema_migrations') IS NOT NULL"


def apply_migrations(database_url: str) -> list[str]:
    """Apply every pending migration, each in its own transaction; return the names applied.

    Idempotent: a database already at the code's version gets nothing and an empty list.
    Raises `SchemaTooNew` when the database is ahead of this code.
    """
    applied_now: list[str] = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(CREATE_MIGRATIONS_TABLE)
        for migration in all_migrations():
            with conn.transaction():
                conn.execute(MIGRATION_LOCK)
                done = {row[0] for row in conn.execute(APPLIED_VERSIONS)}
                if max(done, default=0) > CODE_SCHEMA_VERSION:
                    raise SchemaTooNew(_too_new_message(max(done)))
                if migration.version in done:
                    continue
                conn.execute(migration.sql)  # trusted file shipped with the code
                conn.execute(RECORD_MIGRATION, (migration.version, migration.name))
                applied_now.append(migration.name)
    return applied_now


def schema_version(database_url: str) -> int:
    """The schema version the database is at (0 for an empty database)."""
    with psycopg.connect(database_url) as conn:
        return read_version(conn)


def read_version(conn: psycopg.Connection) -> int:
    if not conn.execute(HAS_MIGRATIONS_TABLE).fetchone()[0]:  # type: ignore[index]
        return 0
    return int(conn.execute(CURRENT_VERSION).fetchone()[0])  # type: ignore[index]


async def read_version_async(conn: psycopg.AsyncConnection) -> int:
    row = await (await conn.execute(HAS_MIGRATIONS_TABLE)).fetchone()
    if not row or not row[0]:
        return 0
    row = await (await conn.execute(CURRENT_VERSION)).fetchone()
    return int(row[0]) if row else 0


def check_version(found: int) -> None:
    """Raise the error a service start-up must report when the schema does not match the code."""
    if found < CODE_SCHEMA_VERSION:
        raise SchemaTooOld(
            f"the database schema is at version {found} but this code needs {CODE_SCHEMA_VERSION}: "
            "run `echo-memory init-db`"
        )
    if found > CODE_SCHEMA_VERSION:
        raise SchemaTooNew(_too_new_message(found))


def _too_new_message(found: int) -> str:
    return (
        f"the database schema is at version {found}, newer than this code ({CODE_SCHEMA_VERSION}): "
        "upgrade echo-mem before using this database"
    )
