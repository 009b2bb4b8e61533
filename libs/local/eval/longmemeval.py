"""LongMemEval (its published JSON): questions, each with its own haystack of chat sessions.

A file is a list of questions with `question_id`, `question_type`, `question`, `answer`,
`haystack_session_ids`, `haystack_dates`, `haystack_sessions` (one list of `{role, content,
has_answer?}` turns per session) and `answer_session_ids`. Questions whose id ends in `_abs`
are abstention questions (the answer is not in the haystack); they have no evidence to find, so
the retrieval harness skips and counts them, as the dataset's own retrieval evaluation does.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# What import_episodes takes in one turn; LongMemEval's longest assistant turns can pass it.
MAX_TURN_CHARS = 20_000
_FIELDS = ("question_id", "question_type", "question", "answer", "haystack_session_ids", "haystack_dates",
           "haystack_sessions", "answer_session_ids")
_WEEKDAY = re.compile(r"\s*\([A-Za-z]{3}\)\s*")


class DatasetError(ValueError):
    """The file is not in LongMemEval's format; the message names the question and field."""


@dataclass
class Turn:
    role: str
    content: str
    has_answer: bool


@dataclass
class Session:
    id: str
    occurred_at: int | None
    turns: list[Turn]


@dataclass
class Question:
    question_id: str
    question_type: str
    question: str
    answer: str
    sessions: list[Session]
    answer_session_ids: list[str]

    @property
    def has_evidence(self) -> bool:
        """False for abstention questions (id ending `_abs`) and for those naming no answer session."""
        return not self.question_id.endswith("_abs") and bool(self.answer_session_ids)


def session_time(text: str) -> int | None:
    """'2023/05/20 (Sat) 02:21' as Unix seconds (UTC); None for any other shape."""
    try:
        return int(datetime.strptime(_WEEKDAY.sub(" ", text).strip(), "%Y/%m/%d %H:%M").replace(tzinfo=UTC).timestamp())
    except (TypeError, ValueError):
        return None


def load(path: str | Path) -> list[Question]:
    """Every question of the file, in file order, with its sessions and their turns.

    Raises DatasetError naming the question and the field for a file that is not LongMemEval's
    format (not a list, a field missing, session lists of different lengths, a turn that is not
    `{role, content}`, an answer session that is not in the haystack).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path} is not a readable JSON file ({exc})") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path} is not a LongMemEval file: expected a list of questions")
    return [_question(index, item) for index, item in enumerate(data)]


def first_of_each_type(questions: list[Question], n: int | None) -> list[Question]:
    """The first `n` questions of each `question_type`, in file order (all when `n` is None)."""
    if n is None:
        return list(questions)
    taken: dict[str, int] = {}
    out = []
    for question in questions:
        if taken.get(question.question_type, 0) < n:
            taken[question.question_type] = taken.get(question.question_type, 0) + 1
            out.append(question)
    return out


def _question(index: int, item: Any) -> Question:
    where = f"question {index}"
    if not isinstance(item, dict):
        raise DatasetError(f"{where} is not an object")
    where = f"question {index} ({item.get('question_id', 'no id')})"
    missing = [name for name in _FIELDS if name not in item]
    if missing:
        raise DatasetError(f"{where} has no {', '.join(missing)}")
    ids, dates, sessions = item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"]
    if not all(isinstance(x, list) for x in (ids, dates, sessions, item["answer_session_ids"])):
        raise DatasetError(f"{where}: haystack_* and answer_session_ids must be lists")
    if not len(ids) == len(dates) == len(sessions):
        raise DatasetError(
            f"{where}: haystack_session_ids, haystack_dates and haystack_sessions differ in length "
            f"({len(ids)}, {len(dates)}, {len(sessions)})"
        )
    unknown = [str(s) for s in item["answer_session_ids"] if s not in ids]
    if unknown:
        raise DatasetError(f"{where}: answer_session_ids {', '.join(unknown)} are not in its haystack")
    return Question(
        question_id=str(item["question_id"]), question_type=str(item["question_type"]), question=str(item["question"]),
        answer=str(item["answer"]),
        sessions=[Session(str(sid), session_time(str(date)), _turns(where, sid, turns))
                  for sid, date, turns in zip(ids, dates, sessions, strict=True)],
        answer_session_ids=[str(s) for s in item["answer_session_ids"]],
    )


def _turns(where: str, session_id: Any, turns: Any) -> list[Turn]:
    if not isinstance(turns, list):
        raise DatasetError(f"{where}: session {session_id} is not a list of turns")
    out = []
    for seq, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("role"), str) or not isinstance(turn.get("content"), str):
            raise DatasetError(f"{where}: turn {seq} of session {session_id} is not {{role, content}}")
        out.append(Turn(turn["role"], turn["content"], bool(turn.get("has_answer", False))))
    return out
