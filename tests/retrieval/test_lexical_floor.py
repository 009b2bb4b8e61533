"""The lexical floor: BM25 is normalised by the larger of the best match and a share of what an
item holding every query term would score, so a weak word match no longer gets the whole lexical
boost when the query's words are mostly elsewhere (dense first when lexical evidence is weak)."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime

from echo_memory.libs.core.config.retrieval import FusionWeights, RetrievalSettings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.query import ItemKind
from echo_memory.libs.core.contracts.reindex import LEXICAL_FORMAT_VERSION
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.store.access import Scope
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.retrieval import channels as ch
from echo_memory.services.retrieval.channels import Candidate, Corpus
from echo_memory.services.retrieval.fusion import fuse
from echo_memory.services.retrieval.request import Search

ON = ("dense", "lexical")


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _pool(lex: float, ideal: float) -> dict[str, Candidate]:
    # "meaning" answers the query but shares no word with it; "word" shares one word and little else.
    meaning = Candidate(id="meaning", kind="episode", cos=0.55, channels={"dense"})
    word = Candidate(id="word", kind="episode", cos=0.30, lex=lex, matched=1, terms=6, lex_ideal=ideal,
                     channels={"dense", "lexical"})
    return {c.id: c for c in (meaning, word)}


def test_a_weak_word_match_keeps_only_its_share_of_the_lexical_boost() -> None:
    pool = _pool(lex=2.0, ideal=12.0)  # one term of six: a sixth of what the whole query could score
    by_max = fuse(pool, FusionWeights(lexical_floor=0.0), ON)
    assert [c.id for c, _ in by_max] == ["word", "meaning"]  # 0.30 + 0.7 × 2/2 beats 0.55
    floored = fuse(pool, FusionWeights(lexical_floor=0.5), ON)
    assert [c.id for c, _ in floored] == ["meaning", "word"]
    assert math.isclose(dict((c.id, v) for c, v in floored)["word"], 0.30 + 0.7 * 2.0 / 6.0)


def test_a_match_that_covers_the_query_keeps_the_whole_boost() -> None:
    pool = _pool(lex=11.0, ideal=12.0)  # above half the ideal: the best match still normalises
    for floor in (0.0, 0.5):
        values = dict((c.id, v) for c, v in fuse(pool, FusionWeights(lexical_floor=floor), ON))
        assert math.isclose(values["word"], 0.30 + 0.7)


async def test_the_lexical_channel_gives_each_candidate_the_querys_ideal_score(
    handlers: Handlers, embedder: MiniLM
) -> None:
    docs = ["Alice: the kiln fired my vase", "Bob: my vase fired in the kiln", "Carol: I bought a vase"]
    episodes = [{"content": text, "session_id": "s", "seq": i} for i, text in enumerate(docs)]
    await handlers.admin_call("writes", "import_episodes", {"episodes": episodes})
    conn = handlers.conn
    scope_id = (await (await conn.execute("SELECT id FROM scopes WHERE name='shared'")).fetchone())[0]  # type: ignore[index]
    query = "kiln fired vase glaze"  # "glaze" is on no row: the corpus does not know it
    pool: ch.Pool = {}
    search = Search(caller=Caller(org="test", agent_id="test"), scopes=(Scope(str(scope_id), "shared", "shared"),),
                    query=query, as_of=None, at=datetime.now(tz=UTC), tier="all", top_k=10, include_episodes=True,
                    settings=RetrievalSettings(candidates=10), model=embedder.name,
                    vector=asyncio.create_task(asyncio.to_thread(embedder.embed_one, query)))
    # Current statistics, so the channel ranks by BM25.
    corpus = Corpus(ItemKind.EPISODE, len(docs), LEXICAL_FORMAT_VERSION, scopes_with_stats=1, has_rows=True)
    await ch.lexical(conn, pool, search, corpus)
    assert len(pool) == 2
    # kiln and fire are on two rows of three, vase on all three.
    ideal = 2 * _idf(3, 2) + _idf(3, 3)
    assert all(math.isclose(c.lex_ideal, ideal) for c in pool.values())
