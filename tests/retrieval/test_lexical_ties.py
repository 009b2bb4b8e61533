"""Equal BM25 scores are ordered by distance to the query, so the same turns imported twice rank
the same way (by id alone, which rows made the lexical channel's limit followed the random ids
each import drew). Handler tier: both imports and the searches on one rolled-back transaction."""

from __future__ import annotations

import itertools

from echo_memory.libs.testing.tiers import Handlers

COLOURS = ["red", "blue", "yellow", "purple", "orange", "silver", "golden", "pink", "brown", "grey"]
ANIMALS = ["horse", "rabbit", "parrot", "goat", "tiger", "camel", "otter", "beetle"]
# 80 turns with the same words' count and one "apples" each: every one has the same BM25 for
# "apples", more than the lexical channel's 50 rows; the cosines differ.
TURNS = [f"Nate: the {colour} {animal} ate green apples" for colour, animal in itertools.product(COLOURS, ANIMALS)]


async def _ranked_texts(handlers: Handlers, scope: str) -> tuple[list[str], list[float]]:
    await handlers.admin_call("writes", "scope_create", {"name": scope, "description": "lexical ties"})
    episodes = [{"content": text, "session_id": f"s{i}", "seq": 0} for i, text in enumerate(TURNS)]
    await handlers.admin_call("writes", "import_episodes", {"scope": scope, "episodes": episodes})
    result = await handlers.admin_call("retrieval", "query_memory",
                                       {"query": "who ate the apples", "scope": scope, "top_k": 10})
    assert all("lexical" in item["matched"] for item in result["results"])
    return [item["text"] for item in result["results"]], [item["score"] for item in result["results"]]


async def test_the_same_turns_imported_twice_rank_the_same(handlers: Handlers) -> None:
    first, scores = await _ranked_texts(handlers, "ties-a")
    second, _ = await _ranked_texts(handlers, "ties-b")
    assert first == second
    # With every lexical signal equal, the order is the cosine's.
    assert scores == sorted(scores, reverse=True)
