"""Migration 0029 creates pg_prewarm where the role may; a role that may not gets a notice, and the
migration goes on (consolidation runs then report the cache as not reloaded)."""

from __future__ import annotations

from uuid import uuid4

import psycopg
from psycopg import sql

from echo_memory.libs.server.store.migrations import all_migrations

INSTALLED = "SELECT count(*) FROM pg_extension WHERE extname = 'pg_prewarm'"


def test_a_role_that_may_not_create_pg_prewarm_is_told_and_the_owner_gets_it(empty_database_url: str) -> None:
    [migration] = [m for m in all_migrations() if m.version == 29]
    role = sql.Identifier(f"no_prewarm_{uuid4().hex[:8]}")
    notices: list[str] = []
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.add_notice_handler(lambda notice: notices.append(notice.message_primary or ""))
        conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(role))
        try:
            conn.execute(sql.SQL("SET ROLE {}").format(role))
            conn.execute(migration.sql)
            conn.execute("RESET ROLE")
            assert conn.execute(INSTALLED).fetchone() == (0,)
            assert [n for n in notices if n.startswith("pg_prewarm not created")]

            conn.execute(migration.sql)
            assert conn.execute(INSTALLED).fetchone() == (1,)
        finally:
            conn.execute("RESET ROLE")
            conn.execute(sql.SQL("DROP ROLE {}").format(role))
