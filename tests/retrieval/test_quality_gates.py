"""Quality gates (services/retrieval/gates.py): filler far below the best match, near-duplicates
and an honest "nothing relevant" are left out of a search's answer, and the note counts them.

The gates alone on hand-made rankings; then query_memory on the handler tier (the services' real
routes on one rolled-back transaction) over imported turns.
"""

from __future__ import annotations

from typing import Any

from echo_memory.libs.core.config.retrieval import QualityGates
from echo_memory.libs.core.contracts.query import Channel, ItemKind
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.retrieval.gates import Ranked, apply_gates

OFF = QualityGates.off()


def _item(item_id: str, cos: float, text: str, *matched: Channel) -> Ranked:
    return Ranked({"id": item_id, "text": text}, ItemKind.FACT, matched or (Channel.DENSE,), cos)


def _ids(kept: list[Ranked]) -> list[str]:
    return [item.id for item in kept]


def test_filler_found_by_meaning_alone_far_below_the_best_is_left_out_and_back_filled() -> None:
    ranked = [
        _item("best", 0.60, "billing uses razorpay"),
        _item("filler", 0.20, "the office plant needs water"),
        _item("word match", 0.10, "razorpay webhook secret rotation", Channel.LEXICAL),
        _item("close", 0.45, "payments go through one provider"),
    ]
    kept, outcome = apply_gates(ranked, QualityGates(), top_k=3)
    assert _ids(kept) == ["best", "word match", "close"]  # a word match stays, however low its cosine
    assert outcome.far_below == 1 and not outcome.nothing_relevant
    assert outcome.note() == "left out 1 far below the best match"
    assert _ids(apply_gates(ranked, OFF, top_k=3)[0]) == ["best", "filler", "word match"]


def test_a_near_duplicate_of_a_better_ranked_item_is_left_out() -> None:
    ranked = [
        _item("first", 0.50, "Deploys run on Fridays after the release review."),
        _item("again", 0.49, "deploys run on fridays, after the release review"),
        _item("other", 0.40, "Release reviews happen on Thursdays."),
    ]
    kept, outcome = apply_gates(ranked, QualityGates(), top_k=10)
    assert _ids(kept) == ["first", "other"]
    assert outcome.near_duplicates == 1
    assert outcome.note() == "left out 1 repeating a better-ranked result"


def test_nothing_relevant_when_nothing_matches_a_word_or_entity_and_the_best_is_far() -> None:
    far = [_item("a", 0.15, "billing uses razorpay"), _item("b", 0.12, "deploys run on fridays")]
    kept, outcome = apply_gates(far, QualityGates(), top_k=10)
    assert kept == [] and outcome.nothing_relevant
    assert outcome.note() is not None and outcome.note().startswith("nothing relevant")  # type: ignore[union-attr]
    # The same cosines with one word match, or with the gate off, are an answer.
    with_word = [*far, _item("c", 0.05, "razorpay", Channel.LEXICAL)]
    assert _ids(apply_gates(with_word, QualityGates(), top_k=10)[0]) == ["a", "b", "c"]
    assert _ids(apply_gates(far, QualityGates(nothing_below=0), top_k=10)[0]) == ["a", "b"]


def test_a_turn_next_to_one_above_the_floor_is_kept_however_far_its_own_cosine() -> None:
    ranked = [
        _item("question", 0.90, "which city hosts the robotics summit?"),
        _item("answer", 0.20, "Lisbon, in the old tram depot."),
        _item("filler", 0.20, "I bought new running shoes."),
    ]
    beside = {"question": 0.20, "answer": 0.90, "filler": 0.30}  # filler's neighbour is below the floor too
    kept, outcome = apply_gates(ranked, QualityGates(), top_k=10, neighbour_cosine=beside)
    assert _ids(kept) == ["question", "answer"]
    assert outcome.far_below == 1
    assert _ids(apply_gates(ranked, QualityGates(), top_k=10)[0]) == ["question"]  # without adjacency


def test_an_empty_ranking_leaves_nothing_out() -> None:
    kept, outcome = apply_gates([], QualityGates(), top_k=10)
    assert kept == [] and outcome.note() is None and not outcome.nothing_relevant


async def _query(handlers: Handlers, query: str, **extra: Any) -> dict[str, Any]:
    return await handlers.admin_call("retrieval", "query_memory", {"query": query, **extra})


async def test_query_memory_answers_nothing_relevant_for_an_off_topic_question(handlers: Handlers) -> None:
    turns = ["The billing service charges cards through Razorpay.", "Deploys of the API run on Fridays."]
    await handlers.admin_call("writes", "import_episodes",
                              {"episodes": [{"content": t, "session_id": "ops", "seq": i} for i, t in enumerate(turns)]})

    answer = await _query(handlers, "banana bread baking temperature")

    assert answer["results"] == [], answer["results"]
    assert answer["note"].startswith("nothing relevant"), answer["note"]
    assert (await _query(handlers, "which provider charges cards"))["results"][0]["text"] == turns[0]


async def test_query_memory_returns_one_of_two_repeated_turns_and_says_so(handlers: Handlers) -> None:
    said = "We agreed that deploys of the API run on Fridays after the release review."
    episodes = [
        {"content": said, "session_id": "monday", "seq": 0},
        {"content": said.lower(), "session_id": "tuesday", "seq": 0},
        {"content": "Release reviews happen on Thursdays with the whole team.", "session_id": "tuesday", "seq": 1},
    ]
    await handlers.admin_call("writes", "import_episodes", {"episodes": episodes})

    answer = await _query(handlers, "when do API deploys run")

    texts = [item["text"].lower() for item in answer["results"]]
    assert texts.count(said.lower()) == 1, texts
    assert "1 repeating a better-ranked result" in answer["note"], answer["note"]


async def test_query_memory_keeps_the_reply_to_the_best_match_and_leaves_out_filler(handlers: Handlers) -> None:
    question, reply = "Which city is hosting the robotics summit this year?", "Lisbon, in the old tram depot by the river."
    filler = ["I bought new running shoes yesterday.", "My sister adopted a grey kitten.",
              "The dentist moved my appointment to Tuesday."]
    episodes = [{"content": question, "session_id": "summit", "seq": 0},
                {"content": reply, "session_id": "summit", "seq": 1},
                *({"content": text, "session_id": f"other-{i}", "seq": 0} for i, text in enumerate(filler))]
    await handlers.admin_call("writes", "import_episodes", {"episodes": episodes})

    answer = await _query(handlers, "which city hosts the robotics summit")

    # The reply shares no word with the query and its cosine is a fifth of the question's.
    assert [item["text"] for item in answer["results"]] == [question, reply], answer["results"]
    assert answer["note"].startswith("left out 3 far below the best match"), answer["note"]
