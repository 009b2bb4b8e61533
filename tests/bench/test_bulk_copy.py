"""The benchmark's COPY loader (used above 10k facts) stores what the write path would: facts with
vectors, their entities, lexical statistics and the scope's embedding-model record; and a query
finds what it loaded."""

from __future__ import annotations

import psycopg

from echo_memory.libs.local.eval.bulk import copy_facts
from echo_memory.libs.local.eval.synthetic import FactSource
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing import EchoStack


async def test_copy_loads_searchable_facts_and_records_the_model(stack: EchoStack, embedder: MiniLM) -> None:
    await stack.admin_call("writes", "scope_create", {"name": "bulk"})
    source = FactSource()
    stored = await copy_facts(stack.database_url, "bulk", source, 30, embedder)
    assert stored == 30
    with psycopg.connect(stack.database_url) as conn:
        scope_id = conn.execute("SELECT id FROM scopes WHERE name = 'bulk'").fetchone()[0]  # type: ignore[index]
        facts, missing_vectors = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE embedding IS NULL) FROM facts WHERE scope_id = %s", (scope_id,)
        ).fetchone()  # type: ignore[misc]
        stats = conn.execute(
            "SELECT doc_count FROM lexical_stats WHERE scope_id = %s AND corpus = 'facts'", (scope_id,)
        ).fetchone()
        model = conn.execute("SELECT model FROM scope_embeddings WHERE scope_id = %s", (scope_id,)).fetchone()
        text = conn.execute("SELECT text FROM facts WHERE scope_id = %s ORDER BY text LIMIT 1", (scope_id,)).fetchone()[0]  # type: ignore[index]
    assert (facts, missing_vectors) == (30, 0)
    assert stats == (30,)
    assert model == (embedder.name,)
    result = await stack.admin_call("retrieval", "query_memory", {"query": text, "scope": "bulk", "top_k": 3})
    assert result["results"][0]["text"] == text
    assert "embedding model" not in (result["note"] or "")
