"""The HNSW path of the dense channel (used above ECHO_MEMORY_HNSW_THRESHOLD rows) finds what the
exact scan finds, scope- and validity-filtered, on a store small enough to check by hand.

Handler tier: the writes go through the services' real routes on one rolled-back transaction, whose
uncommitted rows the HNSW index already holds; the searches run on that connection.
"""

from __future__ import annotations

import psycopg

from echo_memory.libs.core.config.retrieval import RetrievalSettings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.query import QueryMemoryInput
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.retrieval import queries as q
from echo_memory.services.retrieval.search import query_memory

ADMIN = Caller(org="x", agent_id="admin", read_scopes=["*"], write_scopes=["*"])
TOPICS = ["billing", "search", "auth", "deploys", "payroll", "metrics", "email", "storage"]
# How many candidates one HNSW scan keeps: a crowd larger than this hides a small scope from a plain scan.
EF_SEARCH = q.EF_SEARCH
PER_CALL = 49  # at most 50 entities a write_episode call, the service among them
CROWD = (EF_SEARCH // PER_CALL + 1) * PER_CALL


def _episode(scope: str, index: int, topic: str) -> dict:
    service = f"{topic} service"
    store = f"{topic} store {index}"
    return {
        "scope": scope, "session_id": "hnsw", "project": "hnsw",
        "entities": [{"name": service, "type": "service"}, {"name": store, "type": "database"}],
        "entity_resolutions": [{"mention": store, "entity_id": "new", "rationale": "test store"}],
        "facts": [{"source": service, "target": store, "relation": "keeps data in",
                   "fact": f"The {topic} service keeps its records in {topic} store {index}.", "confidence": "extracted"}],
    }


async def _ask(conn: psycopg.AsyncConnection, embedder: MiniLM, scope: str, threshold: int) -> list[str]:
    settings = RetrievalSettings(hnsw_threshold=threshold, channels=("dense",))
    async with conn.transaction():
        result = await query_memory(
            conn, ADMIN, QueryMemoryInput(query="where does the auth service keep its records?", scope=scope, top_k=5),
            embedder, settings,
        )
    return [item.text for item in result.results]


async def test_hnsw_and_exact_scan_agree_and_keep_to_the_scope(handlers: Handlers, embedder: MiniLM) -> None:
    for scope in ("hnsw-a", "hnsw-b"):
        await handlers.admin_call("writes", "scope_create", {"name": scope})
        for index, topic in enumerate(TOPICS * 2):
            stored = await handlers.admin_call("writes", "write_episode", _episode(scope, index, topic))
            assert stored["stored"] is True, stored.get("error")
    conn = handlers.conn
    exact = await _ask(conn, embedder, "hnsw-a", threshold=1_000_000)
    approximate = await _ask(conn, embedder, "hnsw-a", threshold=0)
    assert len(exact) == 5 and exact[0].startswith("The auth service")
    assert approximate == exact  # same five facts, same order; none from hnsw-b (same texts there)
    scopes = await (await conn.execute(
        "SELECT DISTINCT s.name FROM read_results r JOIN facts f ON f.id = r.item_id JOIN scopes s ON s.id = f.scope_id"
    )).fetchall()
    assert scopes == [("hnsw-a",)]


def _crowd_episode(scope: str, first: int, count: int) -> dict:
    """`count` near-identical auth-store facts: each is closer to the query than any billing fact."""
    stores = [f"auth store {index}" for index in range(first, first + count)]
    return {
        "scope": scope, "session_id": "crowd", "project": "hnsw",
        "entities": [{"name": "auth service", "type": "service"}] + [{"name": s, "type": "database"} for s in stores],
        "entity_resolutions": [{"mention": s, "entity_id": "new", "rationale": "test store"} for s in stores],
        "facts": [{"source": "auth service", "target": s, "relation": "keeps data in",
                   "fact": f"The auth service keeps its records in {s}.", "confidence": "extracted"} for s in stores],
    }


async def test_hnsw_keeps_scanning_until_the_scope_fills_the_limit(handlers: Handlers, embedder: MiniLM) -> None:
    """A scope that is a small corner of the index still gets its rows from the HNSW path.

    CROWD facts of another scope, more than a plain HNSW scan keeps (EF_SEARCH), are all nearer
    the query than the 3 of the scope read, so that scan would return only rows the scope filter
    then drops. The iterative scan settings query_memory sets make pgvector keep walking the graph.
    Seq scans and sorts are switched off so the planner takes the HNSW index even on this small
    table (otherwise it reads the scope's 3 rows through the scope index and sorts them, and
    nothing is tested).
    """
    for scope in ("crowd", "lone"):
        await handlers.admin_call("writes", "scope_create", {"name": scope})
    for first in range(0, CROWD, PER_CALL):
        stored = await handlers.admin_call("writes", "write_episode", _crowd_episode("crowd", first, PER_CALL))
        assert stored["stored"] is True, stored.get("error")
    for index in range(3):
        stored = await handlers.admin_call("writes", "write_episode", _episode("lone", index, "billing"))
        assert stored["stored"] is True, stored.get("error")
    conn = handlers.conn
    await conn.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")  # undone with the rollback
    exact = await _ask(conn, embedder, "lone", threshold=1_000_000)
    approximate = await _ask(conn, embedder, "lone", threshold=0)
    assert sorted(exact) == sorted(f"The billing service keeps its records in billing store {i}." for i in range(3))
    assert approximate == exact
