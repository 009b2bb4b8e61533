"""The fixed list of causal connectives that decides which sentences may be sent to the user's model."""

from __future__ import annotations

import pytest

from echo_memory.libs.local.llm.connectives import CONNECTIVES, causal_connective


@pytest.mark.parametrize("connective", CONNECTIVES)
def test_every_listed_connective_is_found_in_a_sentence_in_any_case(connective: str) -> None:
    sentence = f"The rollout stalled {connective.upper()} the cache warmed up."
    assert causal_connective(sentence) == connective


@pytest.mark.parametrize(("sentence", "found"), [
    ("Deploys failed due  to\tthe expired certificate.", "due to"),  # runs of whitespace inside a connective
    ("We pinned numpy so that the wheels build.", "so that"),
    ("The outage led to a freeze.", "led to"),
    ("It was slow because of the N+1 query.", "because"),
])
def test_the_connective_is_reported_normalised(sentence: str, found: str) -> None:
    assert causal_connective(sentence) == found


@pytest.mark.parametrize("sentence", [
    "The team uses Redis for caching.",
    "The aftermath review is on Friday.",  # 'after' only as a whole word
    "Sincere regards to the on-call engineer.",  # "since" inside a word
    "The causeway project uses Postgres.",
    "Payments run on Stripe.",
    "",
])
def test_sentences_without_a_connective_are_not_selected(sentence: str) -> None:
    assert causal_connective(sentence) is None
