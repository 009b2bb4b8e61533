"""The Turn every reader produces, its stable id, and how it becomes one episode's text.

One turn = the user's message, the tool calls and results it caused, and the assistant's reply.
A turn is `complete` once its client has finished it (a final reply, an end-of-turn marker, or
the next user message); readers yield incomplete turns only so the engine knows where to resume.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

# One episode carries at most this much text (libs/core/contracts/imports.py EpisodeIn.content).
MAX_EPISODE_CHARS = 20_000
TOOL_PART_CHARS = 1_200  # each tool call's arguments and each result, shown up to this many characters
MAX_ID_CHARS = 200


def turn_id(source: str, conversation: str, first_message_id: str) -> str:
    """The turn's stable id: the same turn read again, by any run, gets the same id.

    `source:conversation:first message id`; when that is longer than an external id may be,
    `source:` plus the SHA-256 of the whole string.
    """
    plain = f"{source}:{conversation}:{first_message_id}"
    if len(plain) <= MAX_ID_CHARS:
        return plain
    return f"{source}:sha256:{hashlib.sha256(plain.encode('utf-8')).hexdigest()}"


@dataclass
class ToolStep:
    name: str
    arguments: str = ""
    result: str | None = None  # None: no result recorded (yet)
    call_id: str | None = None


@dataclass
class Turn:
    source: str
    conversation: str  # the client's session / conversation id
    first_message_id: str
    last_message_id: str
    user: str
    started_at: float | None  # Unix seconds of the user's message
    ended_at: float | None  # Unix seconds of the last message in the turn
    reply: str = ""
    tools: list[ToolStep] = field(default_factory=list)
    cwd: str | None = None
    model: str | None = None
    complete: bool = False
    seq: int = 0  # the turn's position in its conversation
    resume: Any = None  # reader-specific position after this turn (e.g. a byte offset)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return turn_id(self.source, self.conversation, self.first_message_id)


def clip(text: str, limit: int) -> tuple[str, int]:
    """`text` cut to `limit` characters with a visible marker; (text, characters left out)."""
    if len(text) <= limit:
        return text, 0
    left_out = len(text) - limit
    return f"{text[:limit]} […{left_out} more characters not imported]", left_out


def render(turn: Turn) -> tuple[str, int]:
    """The episode text of a turn and how many characters were left out (0 when none).

    User message and reply are kept whole; tool arguments and results are shortened to
    TOOL_PART_CHARS each, with a marker. If the whole still passes MAX_EPISODE_CHARS the middle
    of the text is cut, again with a marker, so nothing is dropped silently.
    """
    left_out = 0
    parts = [f"User: {turn.user}"]
    for step in turn.tools:
        args, cut = clip(step.arguments, TOOL_PART_CHARS)
        left_out += cut
        parts.append(f"Tool call {step.name}: {args}" if args else f"Tool call {step.name}")
        if step.result is not None:
            result, cut = clip(step.result, TOOL_PART_CHARS)
            left_out += cut
            parts.append(f"Tool result: {result}")
    if turn.reply:
        parts.append(f"Assistant: {turn.reply}")
    text = "\n".join(parts)
    if len(text) > MAX_EPISODE_CHARS:
        keep = MAX_EPISODE_CHARS - 120
        head, tail = text[: keep // 2], text[-(keep // 2):]
        cut = len(text) - len(head) - len(tail)
        left_out += cut
        text = f"{head}\n[…{cut} characters of this turn not imported…]\n{tail}"
    return text, left_out


def content_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
