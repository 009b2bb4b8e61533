"""A database as an older release left it, for the tests of a migration on existing rows."""

from __future__ import annotations

import psycopg

from echo_memory.libs.server.store.migrations import all_migrations
from echo_memory.libs.server.store.schema import CREATE_MIGRATIONS_TABLE, RECORD_MIGRATION


def migrate_before(database_url: str, version: int) -> None:
    """Apply and record every migration older than `version` on the empty database at `database_url`;
    `apply_migrations` then applies `version` and the later ones."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(CREATE_MIGRATIONS_TABLE)
        for migration in all_migrations():
            if migration.version < version:
                conn.execute(migration.sql)
                conn.execute(RECORD_MIGRATION, (migration.version, migration.name))
