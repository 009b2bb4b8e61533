"""Which form of a facts statement a hot-tier search runs, by how many facts wait for a run."""

from __future__ import annotations

import pytest

from echo_memory.services.retrieval import queries as q

RANKED = (q.DENSE_FACTS_HNSW, q.LEXICAL_FACTS_BM25, q.LEXICAL_FACTS_BM25_PAIRS)


@pytest.mark.parametrize("sql", RANKED)
def test_the_ranking_statements_read_the_hot_index_and_what_waits_until_too_much_waits(sql: str) -> None:
    indexed, waiting, filtered = (q.hot_statement(sql, n) for n in (0, q.HOT_PENDING_EXACT, q.HOT_PENDING_EXACT + 1))
    assert "hot_facts" in indexed and "hot_pending" not in indexed and "fact_tiers" not in indexed
    assert "hot_facts" in waiting and "hot_pending" in waiting
    # A scope that never ran: every fact waits, so the facts table's own indexes are filtered.
    assert "hot_facts" not in filtered and "NOT EXISTS (SELECT 1 FROM fact_tiers" in filtered


@pytest.mark.parametrize("sql", (q.DENSE_FACTS_EXACT, q.LEXICAL_FACTS_TS_RANK))
def test_exact_fallback_statements_always_filter_the_facts_table(sql: str) -> None:
    assert {q.hot_statement(sql, n) for n in (0, 1, q.HOT_PENDING_EXACT + 1)} == {q.HOT_FILTERED[sql]}


def test_the_graph_walks_the_hot_edges_however_many_facts_wait() -> None:
    forms = {q.hot_statement(q.GRAPH_NEIGHBOURHOOD, n) for n in (0, 1, q.HOT_PENDING_EXACT + 1)}
    assert forms == {q.HOT_GRAPH_NEIGHBOURHOOD}
    assert "hot_edges" in q.HOT_GRAPH_NEIGHBOURHOOD and "fact_tiers" not in q.HOT_GRAPH_NEIGHBOURHOOD
