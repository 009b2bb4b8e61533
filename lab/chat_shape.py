"""`python -m lab chat-shape`: the episode fusion weights on LoCoMo as written and reshaped like a chat.

LoCoMo's conversations were written by language models: the two speakers strictly alternate
(no two turns of a session in a row by one speaker) and a turn runs ~20 words. People chat in
bursts of short messages, so a question is often followed by its asker's own next message, not
by the reply. A weight tuned on LoCoMo's shape may not survive that. This experiment splits every
turn at its sentence ends into consecutive messages of the same speaker (a shared photo's caption
stays with the last one) and scores both shapes in one run:

- each conversation is imported in both shapes through the real import verb, and every question's
  candidate pool is gathered by the retrieval service's own channel code (lab/fusion_grid.py);
- a reshaped message found counts as its whole turn (evidence names turns); several messages of
  one turn in the top 10 count once for recall, and MRR is the rank of the first;
- each row re-runs fusion under one weighting.

Prints per shape and weighting recall@10, hit@10, MRR@10 and session@10. This experiment is why
a question's reply is the first turn another speaker said, past its asker's own burst (lab/NOTES.md,
"Episode heuristics off the set they were tuned on").
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from echo_memory.libs.core.config.retrieval import FusionWeights, RetrievalSettings
from echo_memory.libs.local.eval import locomo
from echo_memory.libs.local.eval.system import throwaway_stack
from lab.fusion_grid import capture_conversations, run_grid

# A sentence ends at ., ! or ? (or one closing quote or bracket after it) before whitespace.
_SENTENCE_END = re.compile(r"(?<=[.!?][\"')\]])\s+|(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    """`text` cut after each sentence end; never empty (a text with no end is one piece)."""
    pieces = [piece.strip() for piece in _SENTENCE_END.split(text) if piece.strip()]
    return pieces or [text]


def chat_shaped(conv: locomo.Conversation) -> tuple[locomo.Conversation, dict[str, str]]:
    """The conversation with each turn split into consecutive messages of its speaker, renumbered
    within each session; and each message's id mapped to its turn's dia_id."""
    turns: list[locomo.Turn] = []
    turn_of: dict[str, str] = {}
    seq_in: dict[int, int] = {}
    for turn in conv.turns:
        pieces = sentences(turn.text)
        for index, piece in enumerate(pieces):
            seq = seq_in.get(turn.session, 0)
            seq_in[turn.session] = seq + 1
            ident = f"{turn.dia_id}.{index}"
            last = index == len(pieces) - 1
            turns.append(replace(turn, dia_id=ident, seq=seq, text=piece, caption=turn.caption if last else None))
            turn_of[ident] = turn.dia_id
    return replace(conv, turns=turns), turn_of


async def run(
    path: str | Path, grid: list[FusionWeights], settings: RetrievalSettings, *,
    conversations: int | None = None, questions: int | None = None,
) -> dict[str, Any]:
    """Both shapes of the first `conversations` conversations, scored under every weighting of
    `grid` (from `parse_grid(spec, settings.fusion)`, so the service's weights come first)."""
    convs = locomo.load(path)[:conversations]
    reshaped = [chat_shaped(conv) for conv in convs]
    turn_of = {ident: turn for _, mapping in reshaped for ident, turn in mapping.items()}
    async with throwaway_stack() as stack:
        written = await capture_conversations(stack, convs, questions=questions, settings=settings)
        chatty = await capture_conversations(stack, [conv for conv, _ in reshaped], questions=questions,
                                             settings=settings, turn_of=turn_of)
    turns = sum(len(conv.turns) for conv in convs)
    messages = sum(len(conv.turns) for conv, _ in reshaped)
    return {
        "dataset": "locomo", "questions": len(written), "turns": turns, "messages_when_chat_shaped": messages,
        "as_written": run_grid(written, grid, settings.channels),
        "chat_shaped": run_grid(chatty, grid, settings.channels),
    }
