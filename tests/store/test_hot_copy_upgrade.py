"""Migration 0028 on a database whose runs already copied facts into `hot_facts`."""

from __future__ import annotations

import psycopg

from echo_memory.libs.server.store.migrations import all_migrations
from echo_memory.libs.server.store.schema import apply_migrations
from echo_memory.libs.testing.migrations import migrate_before

SCOPE = "SELECT id FROM scopes WHERE name = 'shared'"
ENTITY = "INSERT INTO entities (scope_id, name, type, created_by) VALUES (%s, %s, 'service', 'a') RETURNING id"
FACT = """
INSERT INTO facts (scope_id, source_entity, target_entity, relation, text, confidence, t_valid, t_invalid,
                   agent_id, embedding, token_count)
VALUES (%(scope)s, %(e)s, %(e)s, 'uses', %(text)s, 'extracted', '2025-06-01T00:00:00Z', %(ended)s, 'a',
        %(vector)s, 3)
RETURNING id
"""
COPY = """
INSERT INTO hot_facts (fact_id, scope_id, embedding, tsv, tsv_length)
SELECT id, scope_id, embedding, tsv, tsv_length FROM facts WHERE id = %s
"""
WINDOWS = """
SELECT f.text, h.visible_from = '-infinity', h.visible_until FROM hot_facts h JOIN facts f ON f.id = h.fact_id
"""
PENDING = "SELECT f.text FROM hot_pending p JOIN facts f ON f.id = p.fact_id"


def test_copies_made_before_it_stay_visible_and_those_of_ended_facts_wait_again(empty_database_url: str) -> None:
    vector = "[" + ",".join(["0.05"] * 384) + "]"
    migrate_before(empty_database_url, 28)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        scope = conn.execute(SCOPE).fetchone()[0]  # type: ignore[index]
        entity = conn.execute(ENTITY, (scope, "Ledger")).fetchone()[0]  # type: ignore[index]
        facts = {text: conn.execute(FACT, {"scope": scope, "e": entity, "text": text, "ended": ended,
                                           "vector": vector}).fetchone()[0]  # type: ignore[index]
                 for text, ended in (("current", None), ("ended", "2026-01-01T00:00:00Z"))}
        conn.execute("DELETE FROM hot_pending")  # as a run leaves them: copied, nothing waiting
        for fact_id in facts.values():
            conn.execute(COPY, (fact_id,))

    assert apply_migrations(empty_database_url) == [m.name for m in all_migrations() if m.version >= 28]
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        assert conn.execute(WINDOWS).fetchall() == [("current", True, None)]
        assert conn.execute(PENDING).fetchall() == [("ended",)]
