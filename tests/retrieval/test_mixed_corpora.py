"""Facts and imported turns in one scope: each corpus keeps its fused order, and the two are
merged on the cosine's scale, so a turn that shares the query's words but not its meaning does
not outrank the fact that answers it (services/retrieval/fusion.py, `_merge_corpora`)."""

from __future__ import annotations

from echo_memory.libs.core.config.retrieval import FusionWeights
from echo_memory.libs.local.eval import agent_facts
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.retrieval.channels import Candidate
from echo_memory.services.retrieval.fusion import fuse

ON = ("dense", "lexical", "neighbour")


def _pool(*cands: Candidate) -> dict[str, Candidate]:
    return {c.id: c for c in cands}


def test_a_wordy_turn_does_not_outrank_a_closer_fact() -> None:
    pool = _pool(
        Candidate(id="fact", kind="fact", cos=0.35),
        # Matches every query word, so within the turns it gets the whole lexical boost.
        Candidate(id="turn", kind="episode", cos=0.20, lex=4.0, matched=3, terms=3),
        Candidate(id="turn2", kind="episode", cos=0.25),
    )
    assert [c.id for c, _ in fuse(pool, FusionWeights(), ON)] == ["fact", "turn", "turn2"]


def test_each_corpus_keeps_its_fused_order() -> None:
    turns = _pool(
        Candidate(id="lexical", kind="episode", cos=0.30, lex=4.0, matched=3, terms=3),
        Candidate(id="close", kind="episode", cos=0.50),
    )
    alone = [c.id for c, _ in fuse(turns, FusionWeights(), ON)]
    assert alone == ["lexical", "close"]  # the lexical boost outweighs 0.2 of cosine
    mixed = fuse({**turns, "fact": Candidate(id="fact", kind="fact", cos=0.45)}, FusionWeights(), ON)
    # The best turn is placed at the turns' best cosine (0.50), above the fact; the second at 0.30.
    assert [c.id for c, _ in mixed] == ["lexical", "fact", "close"]


async def test_query_memory_merges_facts_and_turns(handlers: Handlers) -> None:
    fact = "Billing uses Razorpay, not Stripe."
    stored = await handlers.admin_call("writes", "write_episode", agent_facts.write_args("f001", fact))
    assert stored["stored"], stored
    turns = [
        "Caroline: Payday! I take my dog to the park when we get paid, it is our little ritual.",
        "Melanie: That sounds lovely, how do you two spend the afternoon?",
        "Caroline: We take a long walk and then we get ice cream.",
    ]
    episodes = [{"content": text, "session_id": "weekend", "seq": i} for i, text in enumerate(turns)]
    await handlers.admin_call("writes", "import_episodes", {"episodes": episodes})

    result = await handlers.admin_call("retrieval", "query_memory", {"query": "how do we take payments", "top_k": 4})

    first = result["results"][0]
    assert (first["kind"], first["text"]) == ("fact", fact)
    wordy = next(item for item in result["results"] if item["text"] == turns[0])
    assert "lexical" in wordy["matched"]  # the turn is found by its words…
    assert first["score"] > wordy["score"]  # …but the fact is closer in meaning
