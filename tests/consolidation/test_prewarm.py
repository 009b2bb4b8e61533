"""After a run commits, its process reads the pages every hot search needs back into the buffer
cache and says what it read; a dry run reads nothing, and without pg_prewarm, or when reading
fails, the run still stands and says why nothing was read."""

from __future__ import annotations

import psycopg

from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing import EchoStack
from echo_memory.services.consolidation.prewarm import HOT_RELATIONS, fit

EPISODE = {
    "session_id": "s-prewarm",
    "entities": [{"name": "Ledger service", "type": "service"}, {"name": "Postgres", "type": "database"}],
    "facts": [
        {"source": "Ledger service", "target": "Postgres", "relation": "stores in",
         "fact": "The ledger service stores entries in Postgres.", "confidence": "extracted"},
        {"source": "Ledger service", "target": "Postgres", "relation": "reads from",
         "fact": "The ledger service reads account limits from Postgres.", "confidence": "extracted"},
    ],
}
PAGES = "SELECT sum(pg_relation_size(to_regclass(r)) / current_setting('block_size')::bigint) FROM unnest(%s::text[]) AS r"


async def test_a_run_reads_the_hot_search_pages_back_and_says_what_it_read(
    database_url: str, nats_url: str, org: str, embedder: MiniLM
) -> None:
    async with EchoStack(database_url=database_url, nats_url=nats_url, org=org, embedder=embedder) as stack, \
            await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        async with stack.client(stack.issue_token("codex")) as client:
            written = (await client.call_tool("write_episode", EPISODE)).structured_content
        assert written is not None and written["stored"] is True

        [run] = (await stack.admin_call("consolidation", "consolidate", {"scope": "shared"}))["runs"]
        pages = int((await (await conn.execute(PAGES, (list(HOT_RELATIONS),))).fetchone())[0])  # type: ignore[index]
        assert run["prewarm"] == {"pages": pages, "relations": list(HOT_RELATIONS), "skipped": [], "unavailable": None}
        assert pages > 0

        [dry] = (await stack.admin_call("consolidation", "consolidate", {"scope": "shared", "dry_run": True}))["runs"]
        assert dry["prewarm"] is None

        await conn.execute("DROP EXTENSION pg_prewarm")
        [bare] = (await stack.admin_call("consolidation", "consolidate", {"scope": "shared"}))["runs"]
        assert bare["run_id"] is not None
        assert bare["prewarm"] == {"pages": 0, "relations": [], "skipped": [],
                                   "unavailable": "pg_prewarm is not installed in this database"}

        # Reading failing after the run has committed: the run stands, and its result says why.
        await conn.execute("CREATE EXTENSION pg_prewarm")
        await conn.execute("ALTER FUNCTION pg_prewarm(regclass, text, text, bigint, bigint) RENAME TO pg_prewarm_gone")
        [failed] = (await stack.admin_call("consolidation", "consolidate", {"scope": "shared"}))["runs"]
        assert failed["run_id"] is not None and failed["prewarm"]["pages"] == 0
        assert failed["prewarm"]["unavailable"].startswith("pg_prewarm failed (42883)")
        assert (await (await conn.execute("SELECT count(*) FROM consolidation_runs WHERE id = %s",
                                          (failed["run_id"],))).fetchone())[0] == 1  # type: ignore[index]


def test_relations_are_taken_in_order_while_they_fit() -> None:
    sizes = [("hnsw", 40), ("rows", 70), ("digests", 30), ("lexical", 40)]
    assert fit(sizes, 100) == (["hnsw", "digests"], ["rows", "lexical"])
    assert fit(sizes, 180) == (["hnsw", "rows", "digests", "lexical"], [])
    assert fit(sizes, 10) == ([], ["hnsw", "rows", "digests", "lexical"])
    assert fit([], 10) == ([], [])
