"""The chat-shape experiment's reshaping, on a conversation written here."""

from __future__ import annotations

from echo_memory.libs.local.eval.locomo import Conversation, Question, Turn
from lab.chat_shape import chat_shaped, sentences


def _conversation() -> Conversation:
    turns = [
        Turn("D1:1", 1, 0, "Ana", "Hi Bo! Did you move to Lisbon?", 0),
        Turn("D1:2", 1, 1, "Bo", "Yes, in May. The flat is near the river.", 0, caption="a river at dusk"),
        Turn("D2:1", 2, 0, "Ana", "no punctuation here", 0),
    ]
    return Conversation("conv-x", turns, [Question("When did Bo move?", ["D1:2"], 2)], 0)


def test_sentences_cut_at_ends_and_keep_a_text_without_one_whole() -> None:
    assert sentences("Hi Bo! Did you move to Lisbon?") == ["Hi Bo!", "Did you move to Lisbon?"]
    assert sentences('He said "go." Then left.') == ['He said "go."', "Then left."]
    assert sentences("no end") == ["no end"]


def test_a_turn_becomes_consecutive_messages_of_its_speaker() -> None:
    shaped, turn_of = chat_shaped(_conversation())
    assert [(t.dia_id, t.session, t.seq, t.speaker) for t in shaped.turns] == [
        ("D1:1.0", 1, 0, "Ana"), ("D1:1.1", 1, 1, "Ana"),
        ("D1:2.0", 1, 2, "Bo"), ("D1:2.1", 1, 3, "Bo"),
        ("D2:1.0", 2, 0, "Ana"),
    ]
    assert [t.caption for t in shaped.turns] == [None, None, None, "a river at dusk", None]  # with the last piece
    assert turn_of == {"D1:1.0": "D1:1", "D1:1.1": "D1:1", "D1:2.0": "D1:2", "D1:2.1": "D1:2", "D2:1.0": "D2:1"}
    assert shaped.questions == _conversation().questions  # evidence still names whole turns

