"""LoCoMo (locomo10.json): turns as episodes, questions with evidence, and the retrieval metrics.

Evidence ids are normalised the way the dataset's SOURCE.md describes: split on `;` and
whitespace, `D:11:26` → `D11:26`, leading zeros dropped. Ids that still match no turn are
dropped; a question left with no resolvable evidence is skipped (and counted as skipped).

A turn that shares a photo is imported with the photo's caption, "[shares <blip_caption>]", as
the dataset authors' own retrieval baselines render it (task_eval/dpr_qa.py in
snap-research/locomo): the other speaker saw the photo, and 38% of evidence ids point at such
turns. The image-search `query` the dataset also carries is generation metadata, not part of
the conversation, and is left out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EVIDENCE = re.compile(r"^D:?(\d+):0*(\d+)$")


@dataclass
class Turn:
    dia_id: str
    session: int
    seq: int
    speaker: str
    text: str
    occurred_at: int | None
    caption: str | None = None  # what the photo shared with this turn shows (BLIP), if any

    @property
    def content(self) -> str:
        shared = f" [shares {self.caption}]" if self.caption else ""
        return f"{self.speaker}: {self.text}{shared}"


@dataclass
class Question:
    question: str
    evidence: list[str]
    category: int
    answer: str = ""  # the reference answer (judge-external grades a model's answer against it)


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    skipped: int


def normalise_evidence(raw: str) -> list[str]:
    out = []
    for part in re.split(r"[;\s]+", raw.strip()):
        match = _EVIDENCE.match(part)
        if match:
            out.append(f"D{int(match.group(1))}:{int(match.group(2))}")
    return out


def _session_time(text: str | None) -> int | None:
    if not text:
        return None
    try:
        return int(datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").timestamp())
    except ValueError:
        return None


def load(path: str | Path) -> list[Conversation]:
    """Every conversation with its turns (in order) and its questions that have evidence."""
    data: list[dict[str, Any]] = json.loads(Path(path).read_text(encoding="utf-8"))
    conversations = []
    for sample in data:
        conv = sample["conversation"]
        turns: list[Turn] = []
        n = 1
        while f"session_{n}" in conv:
            when = _session_time(conv.get(f"session_{n}_date_time"))
            for seq, turn in enumerate(conv[f"session_{n}"]):
                turns.append(Turn(turn["dia_id"], n, seq, turn["speaker"], turn["text"], when,
                                  (turn.get("blip_caption") or "").strip() or None))
            n += 1
        known = {t.dia_id for t in turns}
        questions, skipped = [], 0
        for qa in sample["qa"]:
            if not qa.get("evidence"):
                continue
            gold = [e for raw in qa["evidence"] for e in normalise_evidence(raw) if e in known]
            if not gold:
                skipped += 1
                continue
            answer = qa.get("answer", qa.get("adversarial_answer", ""))
            questions.append(Question(qa["question"], list(dict.fromkeys(gold)), int(qa["category"]), str(answer)))
        conversations.append(Conversation(sample["sample_id"], turns, questions, skipped))
    return conversations
