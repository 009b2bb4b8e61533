"""BM25 from the trigger-maintained statistics, checked by hand; the ts_rank fallback.

Handler tier: every call goes through the services' real routes on one rolled-back transaction.
"""

from __future__ import annotations

import math

from echo_memory.libs.core.config import load_settings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.query import QueryMemoryInput
from echo_memory.libs.core.contracts.reindex import LEXICAL_FORMAT_VERSION
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.retrieval import queries as q
from echo_memory.services.retrieval.search import query_memory

ADMIN = Caller(org="x", agent_id="admin", read_scopes=["*"], write_scopes=["*"])
DOCS = ["Alice: the kiln fired my vase", "Bob: the kiln is hot hot", "Carol: I bought a vase"]


async def _import(handlers: Handlers) -> list[str]:
    episodes = [{"content": text, "session_id": "s", "seq": i} for i, text in enumerate(DOCS)]
    result = await handlers.admin_call("writes", "import_episodes", {"episodes": episodes})
    return result["episode_ids"]


async def _rows(handlers: Handlers, sql: str, params: dict | None = None) -> list[tuple]:
    return await (await handlers.conn.execute(sql, params)).fetchall()


async def _lexical_params(handlers: Handlers, embedder: MiniLM, query: str) -> dict:
    """A lexical statement's parameters for `query` over the `shared` scope."""
    scope_id = (await _rows(handlers, "SELECT id FROM scopes WHERE name='shared'"))[0][0]
    return {"scope_ids": [scope_id], "at": "infinity", "query": query, "limit": 10, "embedding": embedder.embed_one(query)}


async def _lexical_rows(handlers: Handlers, embedder: MiniLM, sql: str, query: str) -> list[tuple]:
    """The rows one lexical statement returns for `query` over the `shared` scope, in a transaction
    set up as query_memory sets it (the planner may walk the vector index to pick candidates)."""
    await handlers.conn.execute(q.HNSW_SETTINGS)
    return await _rows(handlers, sql, await _lexical_params(handlers, embedder, query))


def _hand_bm25(query_terms: list[str], docs: list[list[str]]) -> list[float]:
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    scores = []
    for doc in docs:
        total = 0.0
        for term in query_terms:
            df = sum(term in d for d in docs)
            tf = doc.count(term)
            if tf:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                total += idf * tf * (q.BM25_K1 + 1) / (tf + q.BM25_K1 * (1 - q.BM25_B + q.BM25_B * len(doc) / avgdl))
        scores.append(total)
    return scores


async def test_statistics_are_maintained_in_the_write_transaction(handlers: Handlers) -> None:
    await _import(handlers)
    stats = (await _rows(
        handlers, "SELECT doc_count, total_length, format_version FROM lexical_stats WHERE corpus='episodes'"
    ))[0]
    df = dict(await _rows(handlers, "SELECT term, df FROM lexical_df WHERE corpus='episodes'"))
    # english tsvector lexemes: alice kiln fire vase | bob kiln hot hot | carol bought vase
    assert stats == (3, 11, LEXICAL_FORMAT_VERSION)
    assert df["kiln"] == 2 and df["vase"] == 2 and df["hot"] == 1


async def test_bm25_matches_a_hand_computed_example(handlers: Handlers, embedder: MiniLM) -> None:
    ids = await _import(handlers)
    docs = [["alic", "kiln", "fire", "vase"], ["bob", "kiln", "hot", "hot"], ["carol", "bought", "vase"]]
    expected = _hand_bm25(["kiln", "hot"], docs)
    rows = await _lexical_rows(handlers, embedder, q.LEXICAL_EPISODES_BM25, "kiln hot")
    got = {str(r[0]): float(r[1]) for r in rows}
    assert set(got) == {ids[0], ids[1]}
    assert math.isclose(got[ids[0]], expected[0], rel_tol=1e-6)
    assert math.isclose(got[ids[1]], expected[1], rel_tol=1e-6)
    assert got[ids[1]] > got[ids[0]]


async def test_stale_statistics_fall_back_to_ts_rank_and_say_so(handlers: Handlers) -> None:
    await _import(handlers)
    fresh = await handlers.admin_call("retrieval", "query_memory", {"query": "kiln"})
    assert fresh["lexical"] == "bm25"
    await handlers.conn.execute("UPDATE lexical_stats SET format_version = 0")
    stale = await handlers.admin_call("retrieval", "query_memory", {"query": "kiln"})
    assert stale["lexical"] == "ts_rank"
    assert "format 0" in stale["note"] and "echo-memory reindex" in stale["note"]
    assert any("lexical" in r["matched"] for r in stale["results"])
    status = await handlers.admin_call("reindex", "lexical_status", {})
    assert {c["corpus"]: c["mode"] for c in status["corpora"]}["episodes"] == "ts_rank"
    rebuilt = await handlers.admin_call("reindex", "reindex", {"step": "lexical"})
    assert rebuilt["format_version"] == LEXICAL_FORMAT_VERSION
    again = await handlers.admin_call("retrieval", "query_memory", {"query": "kiln"})
    assert again["lexical"] == "bm25"


async def test_rows_without_statistics_fall_back_to_ts_rank_instead_of_matching_nothing(handlers: Handlers) -> None:
    await _import(handlers)
    await handlers.conn.execute("DELETE FROM lexical_df WHERE corpus = 'episodes'")
    await handlers.conn.execute("DELETE FROM lexical_stats WHERE corpus = 'episodes'")
    missing = await handlers.admin_call("retrieval", "query_memory", {"query": "kiln"})
    assert missing["lexical"] == "ts_rank"
    assert "no statistics" in missing["note"] and "echo-memory reindex" in missing["note"]
    assert any("lexical" in r["matched"] for r in missing["results"])
    await handlers.admin_call("reindex", "reindex", {"step": "lexical"})
    again = await handlers.admin_call("retrieval", "query_memory", {"query": "kiln"})
    assert again["lexical"] == "bm25" and any("lexical" in r["matched"] for r in again["results"])


async def test_env_switch_forces_the_fallback(handlers: Handlers, embedder: MiniLM, monkeypatch) -> None:
    await _import(handlers)
    monkeypatch.setenv("ECHO_MEMORY_RETRIEVAL__LEXICAL_BM25", "0")
    settings = load_settings().retrieval  # the switch reaches the service through the one settings tree
    result = await query_memory(handlers.conn, ADMIN, QueryMemoryInput(query="kiln"), embedder, settings)
    assert result.lexical == "ts_rank"
    assert "ECHO_MEMORY_RETRIEVAL__LEXICAL_BM25=0" in (result.note or "")


async def test_reindex_embeddings_pages_through_the_scope(handlers: Handlers) -> None:
    await _import(handlers)
    first = await handlers.admin_call("reindex", "reindex", {"step": "embeddings", "limit": 2})
    assert first["processed"] == 2 and first["next"]
    second = await handlers.admin_call("reindex", "reindex", {"step": "embeddings", "limit": 2, "after": first["next"]})
    assert second["processed"] == 1 and second["next"] is None
    assert first["total"] == 3


def _pair_corpus() -> tuple[list[str], list[int]]:
    """Two query terms each on more rows than BM25 scores; three rows hold both, far in meaning."""
    many = q.LEXICAL_CANDIDATES + 20
    docs = [f"zephyr weather note {i}: sunny and warm by the sea" for i in range(many)]
    docs += [f"quokka sighting {i}: a small marsupial on the island" for i in range(many + 10)]
    docs += [f"walrus count {i}: the herd rested on the ice floe" for i in range(many + 20)]
    both = list(range(len(docs), len(docs) + 3))
    docs += [f"ledger {i}: the invoice batch for zephyr quokka failed its nightly reconciliation against the bank"
             for i in range(3)]
    return docs, both


async def _import_pair_corpus(handlers: Handlers) -> set[str]:
    """Imports `_pair_corpus` into the `shared` scope; the ids of the three rows holding both terms."""
    docs, both = _pair_corpus()
    episodes = [{"content": text, "session_id": "s", "seq": i} for i, text in enumerate(docs)]
    ids = (await handlers.admin_call("writes", "import_episodes", {"episodes": episodes}))["episode_ids"]
    return {ids[i] for i in both}


async def test_rows_holding_both_rarest_terms_are_candidates_however_far_their_meaning(
    handlers: Handlers, embedder: MiniLM
) -> None:
    # Each term is on more rows than the channel scores, so candidates used to be the rarest
    # term's rows nearest the query vector: the three rows holding both terms, about invoices,
    # lost to sunny-weather rows. Now the rows holding both of the two rarest terms come first.
    both = await _import_pair_corpus(handlers)
    query = "zephyr quokka sunshine forecast today"
    rows = await _lexical_rows(handlers, embedder, q.LEXICAL_EPISODES_BM25_PAIRS, query)
    assert {str(r[0]) for r in rows} == both
    assert all(r[3] == 2 for r in rows)  # each matched both terms
    # query_memory picks that statement for a corpus this size, so the lexical channel finds them.
    result = await handlers.admin_call("retrieval", "query_memory", {"query": query, "top_k": 50})
    lexical = {r["id"] for r in result["results"] if "lexical" in r["matched"]}
    assert lexical == both

    # Two common terms that never share a row: the rows matching either are the candidates.
    apart = await _lexical_rows(handlers, embedder, q.LEXICAL_EPISODES_BM25_PAIRS, "zephyr walrus")
    assert len(apart) == 10 and all(r[3] == 1 for r in apart)


async def test_rows_holding_both_rarest_terms_are_candidates_when_the_vector_index_picks_them(
    handlers: Handlers, embedder: MiniLM
) -> None:
    # Which path picks the candidates is the planner's choice, from the table's statistics. Through
    # the HNSW index, a walk that stops at ef_search rows finds none of the three far-off rows, and
    # the statement scored the nearest rows holding one term instead; query_memory's settings keep
    # the walk going until enough rows pass. The other paths are taken away here to force that one.
    both = await _import_pair_corpus(handlers)
    for statement in ("SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off",
                      "DROP INDEX episodes_searchable_idx", "DROP INDEX episodes_scope_idx"):
        await handlers.conn.execute(statement)  # undone with the test's transaction
    query = "zephyr quokka sunshine forecast today"
    plan = await _rows(handlers, "EXPLAIN " + q.LEXICAL_EPISODES_BM25_PAIRS, await _lexical_params(handlers, embedder, query))
    assert any("episodes_embedding_hnsw" in line for (line,) in plan)
    rows = await _lexical_rows(handlers, embedder, q.LEXICAL_EPISODES_BM25_PAIRS, query)
    assert {str(r[0]) for r in rows} == both


async def test_text_without_cjk_gets_exactly_the_english_tsvector(handlers: Handlers) -> None:
    samples = ["Alice: the kiln fired my vase", "Payments API v7 uses Postgres 16 (k8s, us-east-1).", ""]
    for text in samples:
        same = await _rows(handlers, "SELECT echo_lexical(%(t)s) = to_tsvector('english', %(t)s)", {"t": text})
        assert same == [(True,)], text


async def test_cjk_runs_become_character_pairs_beside_english_lexemes(handlers: Handlers) -> None:
    rows = await _rows(handlers, "SELECT echo_lexical(%s)::text", ("数据库大会 in Hangzhou",))
    lexemes = rows[0][0]
    for pair in ("'数据'", "'据库'", "'库大'", "'大会'", "'hangzhou'"):
        assert pair in lexemes, lexemes
    assert "数据库大会" not in lexemes.replace("'数据'", "")  # the run is not kept whole


async def test_a_chinese_question_finds_its_message_through_the_lexical_channel(handlers: Handlers) -> None:
    messages = ["我下周要去杭州参加数据库技术大会。", "数据库技术大会的门票价格是八百元。", "我的同事小王喜欢喝乌龙茶。"]
    episodes = [{"content": text, "session_id": "zh", "seq": i} for i, text in enumerate(messages)]
    ids = (await handlers.admin_call("writes", "import_episodes", {"episodes": episodes}))["episode_ids"]
    result = await handlers.admin_call("retrieval", "query_memory", {"query": "门票价格是多少？"})
    assert result["lexical"] == "bm25"
    lexical = [r["id"] for r in result["results"] if "lexical" in r["matched"]]
    assert lexical and lexical[0] == ids[1], result["results"]
