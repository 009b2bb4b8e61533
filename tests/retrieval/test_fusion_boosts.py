"""Coordination and proximity: the lexical detail the BM25 statement returns, and what fusion does with it."""

from __future__ import annotations

import math

from echo_memory.libs.core.config.retrieval import FusionWeights
from echo_memory.libs.local.eval.agent_facts import write_args
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.retrieval import queries as q
from echo_memory.services.retrieval.channels import Candidate, proximity
from echo_memory.services.retrieval.fusion import fuse

DOCS = ["Alice: the kiln fired my vase", "Bob: my vase fired in the kiln", "Carol: I bought a vase"]


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


async def test_bm25_rows_carry_matched_terms_positions_and_idf(handlers: Handlers, embedder: MiniLM) -> None:
    episodes = [{"content": text, "session_id": "s", "seq": i} for i, text in enumerate(DOCS)]
    ids = (await handlers.admin_call("writes", "import_episodes", {"episodes": episodes}))["episode_ids"]
    query = "kiln fired vase"
    conn = handlers.conn
    scope_id = (await (await conn.execute("SELECT id FROM scopes WHERE name='shared'")).fetchone())[0]  # type: ignore[index]
    rows = await (await conn.execute(
        q.LEXICAL_EPISODES_BM25,
        {"scope_ids": [scope_id], "at": "infinity", "query": query, "limit": 10,
         "embedding": embedder.embed_one(query)},
    )).fetchall()
    by_id = {str(r[0]): r for r in rows}
    # "vase" is on every row, so only the two rarer terms make candidates: Carol is not one.
    assert set(by_id) == set(ids[:2])
    alice, bob = by_id[ids[0]], by_id[ids[1]]
    # columns: id, lex, cos, matched, terms, doc_positions, query_positions, idfs; the
    # query-side ones (the same for every row) come on the first row only.
    assert (alice[3], bob[3]) == (3, 3)
    assert alice[4] == bob[4] == 3
    assert alice[5] == {"kiln": [3], "fire": [4], "vase": [6]}
    assert bob[5] == {"vase": [3], "fire": [4], "kiln": [7]}
    first, second = rows
    assert second[6] is None and second[7] is None
    query_positions, idfs = first[6], first[7]
    assert query_positions == {"kiln": [1], "fire": [2], "vase": [3]}
    assert math.isclose(idfs["kiln"], _idf(3, 2)) and math.isclose(idfs["vase"], _idf(3, 3))
    # Alice has "kiln fired" adjacent and "fired … vase" two apart, in query order; Bob has the
    # same words in another order, which only "fired in the kiln"… never kiln→fire or fire→vase.
    assert math.isclose(proximity(query_positions, alice[5], idfs), _idf(3, 2) + _idf(3, 3))
    assert proximity(query_positions, bob[5], idfs) == 0.0


def test_proximity_counts_each_pair_once_and_respects_the_window() -> None:
    idf = {"a": 2.0, "b": 1.0, "c": 3.0}
    assert proximity({"a": [1], "b": [2]}, {"a": [1, 9], "b": [2, 10]}, idf) == 1.0
    assert proximity({"a": [1], "b": [2]}, {"a": [1], "b": [5]}, idf) == 0.0  # 4 apart, window 3
    assert proximity({"a": [1], "b": [5]}, {"a": [1], "b": [7]}, idf) == 1.0  # query gap 4 + slack 2
    assert proximity({"a": [1], "c": [2]}, {"c": [1], "a": [2]}, idf) == 0.0  # wrong order
    assert proximity({"a": [1], "b": [2], "c": [3]}, {"a": [1], "b": [2], "c": [3]}, idf) == 2.0


def test_coordination_needs_three_terms_or_every_term_of_a_short_query() -> None:
    weights = FusionWeights(fact_lexical=0.0, fact_coordination=0.1, fact_proximity=0.0)
    pool = {
        "two-of-four": Candidate("two-of-four", "fact", cos=0.50, lex=9.0, matched=2, terms=4, channels={"lexical"}),
        "three-of-four": Candidate("three-of-four", "fact", cos=0.45, lex=6.0, matched=3, terms=4, channels={"lexical"}),
        "dense-only": Candidate("dense-only", "fact", cos=0.48, channels={"dense"}),
    }
    order = [c.id for c, _ in fuse(pool, weights, ["dense", "lexical"])]
    # 0.45 + 0.1·6/9 ≈ 0.517 beats 0.50: two matched words earn no boost for facts at all.
    assert order == ["three-of-four", "two-of-four", "dense-only"]
    short = {
        "exact": Candidate("exact", "fact", cos=0.30, lex=4.0, matched=1, terms=1, channels={"lexical"}),
        "near": Candidate("near", "fact", cos=0.35, channels={"dense"}),
    }
    assert [c.id for c, _ in fuse(short, weights, ["dense", "lexical"])] == ["exact", "near"]
    # Switching the lexical channel off removes every lexical boost.
    assert [c.id for c, _ in fuse(short, weights, ["dense"])] == ["near", "exact"]


def test_default_weights_rank_the_fact_with_the_query_words_in_order_first() -> None:
    """Two facts match every query word equally (same BM25, same cosine); the shipped fact
    proximity weight puts the one holding the words next to each other, in order, first."""
    pool = {
        "a-scattered": Candidate("a-scattered", "fact", cos=0.40, lex=5.0, matched=3, terms=3, channels={"lexical"}),
        "b-in-order": Candidate("b-in-order", "fact", cos=0.40, lex=5.0, matched=3, terms=3, prox=2.0,
                                channels={"lexical"}),
    }
    assert FusionWeights().fact_proximity > 0
    assert [c.id for c, _ in fuse(pool, FusionWeights(), ["dense", "lexical"])] == ["b-in-order", "a-scattered"]
    # Without the proximity weight the two tie and the id breaks the tie the other way.
    flat = FusionWeights(fact_proximity=0.0)
    assert [c.id for c, _ in fuse(pool, flat, ["dense", "lexical"])] == ["a-scattered", "b-in-order"]


def test_neighbour_share_lifts_the_reply_next_to_a_strong_turn() -> None:
    """A turn no channel found ranks above an unrelated dense hit only through its neighbour."""
    pool = {
        "question": Candidate("question", "episode", cos=0.60, channels={"dense"}, neighbours={"reply"}),
        "reply": Candidate("reply", "episode", cos=0.20, neighbours={"question"}),
        "other": Candidate("other", "episode", cos=0.25, channels={"dense"}),
    }
    weights = FusionWeights()
    order = [c.id for c, _ in fuse(pool, weights, ["dense", "lexical", "neighbour"])]
    # reply: (0.20 + 0.15·0.60) / scale = 0.29 / scale > other: 0.25 / scale.
    assert order == ["question", "reply", "other"]
    assert [c.id for c, _ in fuse(pool, weights, ["dense", "lexical"])] == ["question", "other", "reply"]


async def test_an_error_string_fact_ranks_first_through_the_service(handlers: Handlers) -> None:
    """agent-facts q085: dense alone puts the ORM fact first; three shared words lift the right one."""
    facts = {
        "f1": "The ORM is SQLAlchemy 2.0 with the async engine and the asyncpg driver.",
        "f2": "asyncpg raises 'another operation is in progress' when a session is shared across tasks.",
        "f3": "Redis 7 is used for caching and as the Celery broker.",
    }
    by_fact: dict[str, str] = {}
    for name, text in facts.items():
        result = await handlers.admin_call("writes", "write_episode", write_args(name, text))
        by_fact[result["edges_created"][0]["fact_id"]] = name
    query = "I get 'another operation is in progress' from the database driver"
    result = await handlers.admin_call("retrieval", "query_memory", {"query": query, "include_episodes": False})
    ranked = [by_fact[r["id"]] for r in result["results"]]
    assert ranked[0] == "f2", result["results"]
    first = result["results"][0]
    assert "lexical" in first["matched"]
    # score stays the cosine: the ORM fact is closer to the query by embedding alone
    assert first["score"] < next(r["score"] for r in result["results"] if by_fact[r["id"]] == "f1")
