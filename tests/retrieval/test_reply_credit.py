"""A turn that asks a question passes a share of its value to its reply, the next turn of the session.

Fusion alone on hand-made candidates; then query_memory on the handler tier's connection (turns
imported through the services' real routes on one rolled-back transaction), with and without the credit.
"""

from __future__ import annotations

import psycopg
import pytest

from echo_memory.libs.core.config.retrieval import FusionWeights, RetrievalSettings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.query import QueryMemoryInput
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.retrieval import queries as q
from echo_memory.services.retrieval.channels import Candidate
from echo_memory.services.retrieval.fusion import fuse
from echo_memory.services.retrieval.search import query_memory

ADMIN = Caller(org="x", agent_id="admin", read_scopes=["*"], write_scopes=["*"])
ON = ("dense", "lexical", "neighbour")
NO_CREDIT = FusionWeights(reply=0.0, question_penalty=0.0)


def _dialog() -> dict[str, Candidate]:
    """A question turn that matches the query well, and its reply, which matches it less."""
    question = Candidate(id="q", kind="episode", cos=0.8, lex=10.0, matched=3, terms=3, reply="r")
    reply = Candidate(id="r", kind="episode", cos=0.5)
    question.neighbours.add("r")
    reply.neighbours.add("q")
    return {"q": question, "r": reply}


def test_the_reply_outranks_the_question_it_answers() -> None:
    assert [c.id for c, _ in fuse(_dialog(), FusionWeights(), ON)] == ["r", "q"]
    assert [c.id for c, _ in fuse(_dialog(), NO_CREDIT, ON)] == ["q", "r"]


def test_only_a_question_gives_and_only_with_the_neighbour_channel() -> None:
    statement = _dialog()
    statement["q"].reply = None  # the same turn, not asking anything
    assert [c.id for c, _ in fuse(statement, FusionWeights(), ON)] == ["q", "r"]
    assert [c.id for c, _ in fuse(_dialog(), FusionWeights(), ("dense", "lexical"))] == ["q", "r"]


def test_credit_uses_values_before_credit() -> None:
    # q1 asks, its reply q2 asks too, whose reply is r: q2's gift to r is 0.6 of q2's own value,
    # not of the value q1 gave it.
    pool = {
        "q1": Candidate(id="q1", kind="episode", cos=0.9, reply="q2"),
        "q2": Candidate(id="q2", kind="episode", cos=0.1, reply="r"),
        "r": Candidate(id="r", kind="episode", cos=0.1),
    }
    weights = FusionWeights(neighbour=0.0)
    values = {c.id: v for c, v in fuse(pool, weights, ON)}
    assert values["r"] == pytest.approx(0.1 + 0.6 * 0.1)
    assert values["q2"] == pytest.approx(0.1 + 0.6 * 0.9 - 0.2 * 0.1)
    assert values["q1"] == pytest.approx(0.9 - 0.2 * 0.9)


@pytest.mark.parametrize(
    ("content", "asks"),
    [
        ("Nate: Where did you get the ideas?", True),
        ("Nate: Where did you get the ideas?  ", True),
        # The pattern knows no chat format's attachment notes: text after the "?" ends the question.
        ("Nate: Which one? [shares a photo of two notebooks]", False),
        ("Nate: What? No way. I never knew.", False),
        ("Nate: I got them [from my notes]", False),
        ("Nate: ?!", False),
    ],
)
async def test_question_pattern_in_postgres(database_url: str, content: str, asks: bool) -> None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        row = await (await conn.execute("SELECT %s ~ %s", (content, q.QUESTION_PATTERN))).fetchone()
    assert row == (asks,)


async def test_query_memory_ranks_the_answer_first(handlers: Handlers, embedder: MiniLM) -> None:
    turns = [
        ("writing", "Nate: Where did you get the ideas for your characters?"),
        ("writing", "Joanna: Mostly from people I know, and from things I see on long walks."),
        ("writing", "Nate: Cool. I went fishing with my uncle yesterday."),
        ("games", "Joanna: Did you finish the tournament last weekend?"),
        ("games", "Nate: Yes, I came second, which I am happy with."),
    ]
    episodes = [{"content": text, "session_id": session, "seq": i} for i, (session, text) in enumerate(turns)]
    ids = (await handlers.admin_call("writes", "import_episodes", {"episodes": episodes}))["episode_ids"]
    question = "Where does Joanna get the ideas for her characters?"

    async def ranked(weights: FusionWeights) -> list[str]:
        async with handlers.conn.transaction():
            result = await query_memory(handlers.conn, ADMIN, QueryMemoryInput(query=question, top_k=3), embedder,
                                        RetrievalSettings(fusion=weights))
        return [item.id for item in result.results]

    assert (await ranked(NO_CREDIT))[:2] == [ids[0], ids[1]]  # the question turn matches best…
    assert (await ranked(FusionWeights()))[:2] == [ids[1], ids[0]]  # …the reply answers it


async def test_a_question_followed_by_its_askers_own_message_credits_the_other_speakers_answer(
    handlers: Handlers, embedder: MiniLM
) -> None:
    # People chat in bursts: the turn after Nate's question is Nate's own, so it is no reply; the
    # reply is Joanna's turn after it. Without speakers, the next turn is taken for the reply.
    turns = [
        ("Nate", "Nate: Where did you get the ideas for your characters?"),
        ("Nate", "Nate: I went fishing with my uncle yesterday, by the way."),
        ("Joanna", "Joanna: Mostly from people I know, and from long walks."),
    ]
    question = "Where does Joanna get the ideas for her characters?"

    async def ranked(with_speakers: bool, weights: FusionWeights) -> list[int]:
        episodes = [{"content": text, "session_id": "burst", "seq": i, **({"speaker": who} if with_speakers else {})}
                    for i, (who, text) in enumerate(turns)]
        scope = f"reply-{'speakers' if with_speakers else 'anonymous'}-{'credit' if weights.reply else 'none'}"
        await handlers.admin_call("writes", "scope_create", {"name": scope})
        ids = (await handlers.admin_call("writes", "import_episodes", {"scope": scope, "episodes": episodes}))["episode_ids"]
        async with handlers.conn.transaction():
            result = await query_memory(handlers.conn, ADMIN, QueryMemoryInput(query=question, scope=scope, top_k=3),
                                        embedder, RetrievalSettings(fusion=weights))
        return [ids.index(item.id) for item in result.results]

    # Lexical refinements on, so the question turn's value (and so its credit) is large enough
    # that whichever turn receives it moves.
    credit = FusionWeights(episode_coordination=0.3, episode_proximity=0.8)
    no_credit = credit.model_copy(update={"reply": 0.0, "question_penalty": 0.0})
    assert await ranked(True, no_credit) == [0, 2, 1]  # the question turn matches best
    assert await ranked(True, credit) == [2, 0, 1]  # Joanna's answer, past Nate's own message
    anonymous = await ranked(False, credit)
    assert anonymous.index(1) < anonymous.index(2)  # with no speakers the next turn took the credit
