"""Migrations, schema-version checks and what a person sees when the schema does not fit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from echo_memory.libs.core.contracts.errors import SchemaTooNew
from echo_memory.libs.server.store.migrations import CODE_SCHEMA_VERSION, all_migrations
from echo_memory.libs.server.store.schema import apply_migrations, schema_version

BIN = Path(sys.executable).parent / "echo-memory"


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")}
    return subprocess.run([str(BIN), *args], env={**base, **env}, capture_output=True, text=True, timeout=120)


def test_migrations_apply_once_and_are_idempotent(empty_database_url: str) -> None:
    first = apply_migrations(empty_database_url)
    assert first == [m.name for m in all_migrations()]
    assert apply_migrations(empty_database_url) == []
    assert schema_version(empty_database_url) == CODE_SCHEMA_VERSION


def test_schema_v1_has_the_tables_of_the_brief(database_url: str) -> None:
    expected = {
        "scopes", "agents", "tokens", "episodes", "entities", "entity_aliases", "facts", "audit_log",
        "reads", "read_results", "recall_saves", "documents", "document_ingestions", "lexical_stats",
        "lexical_df", "outbox", "idempotency", "schema_migrations",
    }
    with psycopg.connect(database_url) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        columns = {r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'facts'")}
    assert expected <= tables
    assert {"t_valid", "t_invalid", "agent_id", "tool", "project", "session_id", "causal_hint", "embedding"} <= columns


def test_init_db_prints_what_it_applied_then_that_nothing_was_pending(empty_database_url: str) -> None:
    first = run_cli("init-db", ECHO_MEMORY_DATABASE_URL=empty_database_url)
    assert first.returncode == 0, first.stderr
    assert "applied 0001_schema_v1.sql" in first.stdout
    second = run_cli("init-db", ECHO_MEMORY_DATABASE_URL=empty_database_url)
    assert second.returncode == 0
    assert "already up to date" in second.stdout and "applied" not in second.stdout


def test_a_service_against_an_older_schema_exits_naming_init_db(empty_database_url: str, nats_url: str) -> None:
    result = run_cli("service", "writes", ECHO_MEMORY_DATABASE_URL=empty_database_url, ECHO_MEMORY_NATS_URL=nats_url)
    assert result.returncode == 3
    assert "echo-memory init-db" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_schema_newer_than_the_code_is_refused(database_url: str, nats_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, 'from_the_future.sql')",
                     (CODE_SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaTooNew):
        apply_migrations(database_url)
    result = run_cli("service", "retrieval", ECHO_MEMORY_DATABASE_URL=database_url, ECHO_MEMORY_NATS_URL=nats_url)
    assert result.returncode == 3
    assert "newer than this code" in result.stderr and "Traceback" not in result.stderr


def test_only_one_active_edge_per_key_is_enforced_by_the_database(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        scope = conn.execute("SELECT id FROM scopes WHERE name = 'shared'").fetchone()[0]
        a, b = (conn.execute(
            "INSERT INTO entities (scope_id, name, type, created_by) VALUES (%s, %s, 't', 'x') RETURNING id",
            (scope, name)).fetchone()[0] for name in ("A", "B"))
        insert = ("INSERT INTO facts (scope_id, source_entity, target_entity, relation, text, confidence, agent_id,"
                  " embedding, token_count) VALUES (%s, %s, %s, 'r', %s, 'extracted', 'x', %s, 1)")
        vector = "[" + ",".join(["0"] * 383 + ["1"]) + "]"
        conn.execute(insert, (scope, a, b, "one", vector))
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(insert, (scope, a, b, "two", vector))
