"""An `as_of` search ranks exactly, whatever the store's size: what the HNSW graph finds depends on
its current shape, which later inserts and row moves (a consolidation's tier moves) change, so a
past instant's answer through it could change too."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg

from echo_memory.libs.core.config.retrieval import RetrievalSettings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.query import QueryMemoryInput
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.retrieval.search import query_memory

ADMIN = Caller(org="x", agent_id="admin", read_scopes=["*"], write_scopes=["*"])
TOPICS = ["billing", "search", "auth", "deploys", "payroll", "metrics"]
HNSW_SCANS = "SELECT pg_stat_get_xact_numscans('facts_embedding_hnsw'::regclass)"


def _episode(scope: str, topic: str) -> dict:
    store = f"{topic} store"
    return {
        "scope": scope, "session_id": "as-of", "project": "as-of",
        "entities": [{"name": f"{topic} service", "type": "service"}, {"name": store, "type": "database"}],
        "entity_resolutions": [{"mention": store, "entity_id": "new", "rationale": "test store"}],
        "facts": [{"source": f"{topic} service", "target": store, "relation": "keeps data in",
                   "fact": f"The {topic} service keeps its records in {store}.", "confidence": "extracted"}],
    }


async def _ask(conn: psycopg.AsyncConnection, embedder: MiniLM, as_of: str | None, threshold: int) -> list[str]:
    settings = RetrievalSettings(hnsw_threshold=threshold, channels=("dense",))
    # Every tier: a hot search of a scope no run has placed reads its few facts exactly, never by HNSW.
    args = QueryMemoryInput(query="where does the auth service keep its records?", scope="asof", top_k=3, as_of=as_of,
                            tier="all")
    result = await query_memory(conn, ADMIN, args, embedder, settings)
    return [item.text for item in result.results]


async def _hnsw_scans(conn: psycopg.AsyncConnection) -> int:
    return int((await (await conn.execute(HNSW_SCANS)).fetchone())[0])  # type: ignore[index]


async def test_an_as_of_search_never_walks_the_hnsw_index(handlers: Handlers, embedder: MiniLM) -> None:
    await handlers.admin_call("writes", "scope_create", {"name": "asof"})
    for topic in TOPICS:
        stored = await handlers.admin_call("writes", "write_episode", _episode("asof", topic))
        assert stored["stored"] is True, stored.get("error")
    conn = handlers.conn
    # On a table this small the planner would read the scope and sort it anyway: switched off, the
    # HNSW statement can only run through the index, so the scan counter tells which path ran.
    await conn.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")
    now = datetime.now(tz=UTC).isoformat()
    exact = await _ask(conn, embedder, None, threshold=1_000_000)

    before = await _hnsw_scans(conn)
    current = await _ask(conn, embedder, None, threshold=0)
    assert await _hnsw_scans(conn) > before  # the probe sees an HNSW search when there is one
    assert current == exact

    before = await _hnsw_scans(conn)
    past = await _ask(conn, embedder, now, threshold=0)
    assert await _hnsw_scans(conn) == before
    assert past == exact and past[0].startswith("The auth service")
