"""Migration 0032 on a database whose runs already placed facts out of the hot tier."""

from __future__ import annotations

import psycopg

from echo_memory.libs.server.store.migrations import all_migrations
from echo_memory.libs.server.store.schema import apply_migrations
from echo_memory.libs.testing.migrations import migrate_before

SCOPE = "SELECT id FROM scopes WHERE name = 'shared'"
ENTITY = "INSERT INTO entities (scope_id, name, type, created_by) VALUES (%s, %s, 'service', 'a') RETURNING id"
FACT = """
INSERT INTO facts (scope_id, source_entity, target_entity, relation, text, confidence, t_valid, agent_id,
                   embedding, token_count)
VALUES (%(scope)s, %(source)s, %(target)s, %(text)s, %(text)s, 'extracted', '2025-06-01T00:00:00Z', 'a',
        %(vector)s, 3)
RETURNING id
"""
EDGES = """
SELECT f.text FROM hot_edges e JOIN facts f
  ON f.id = e.fact_id AND f.scope_id = e.scope_id AND f.source_entity = e.source_entity
 AND f.target_entity = e.target_entity
ORDER BY f.text
"""


def test_the_hot_facts_edges_are_filled_in_and_kept_by_every_later_move(empty_database_url: str) -> None:
    vector = "[" + ",".join(["0.05"] * 384) + "]"
    migrate_before(empty_database_url, 32)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        scope = conn.execute(SCOPE).fetchone()[0]  # type: ignore[index]
        ledger, payouts = (conn.execute(ENTITY, (scope, name)).fetchone()[0]  # type: ignore[index]
                           for name in ("Ledger", "Payouts"))
        facts = {text: conn.execute(FACT, {"scope": scope, "source": ledger, "target": payouts, "text": text,
                                           "vector": vector}).fetchone()[0]  # type: ignore[index]
                 for text in ("consolidated", "hot")}
        conn.execute("INSERT INTO fact_tiers (fact_id, tier) VALUES (%s, 'consolidated')", (facts["consolidated"],))

    assert apply_migrations(empty_database_url) == [m.name for m in all_migrations() if m.version >= 32]
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        assert conn.execute(EDGES).fetchall() == [("hot",)]
        conn.execute("DELETE FROM fact_tiers WHERE fact_id = %s", (facts["consolidated"],))  # promoted
        assert conn.execute(EDGES).fetchall() == [("consolidated",), ("hot",)]
        conn.execute("INSERT INTO fact_tiers (fact_id, tier) VALUES (%s, 'archived')", (facts["hot"],))
        assert conn.execute(EDGES).fetchall() == [("consolidated",)]
        conn.execute("DELETE FROM facts WHERE id = %s", (facts["consolidated"],))  # an erasure's cascade
        assert conn.execute(EDGES).fetchall() == []
