"""What every source reader implements, and the streaming JSON Lines reader most of them share."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from echo_memory.libs.local.history.turns import Turn

GUARD_BYTES = 256  # bytes before a resume offset whose hash must match to resume there


@dataclass
class Conversation:
    """One conversation a source holds: a transcript file or a row group in a client database."""

    key: str  # stable across runs: the checkpoint's key (a path, or `db-path#id`)
    updated: float  # Unix seconds it last changed (file mtime, or the client's own time)
    size: int | None = None  # bytes, for files
    handle: Any = None  # reader-private: what turns() needs to open it


@dataclass
class ReadStats:
    """What a read met besides turns, reported after a run (never silently dropped)."""

    unreadable_lines: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


class Source(Protocol):
    name: str  # the client: claude-code, codex, cursor, gemini-cli, opencode, vscode-copilot

    def conversations(self) -> Iterator[Conversation]:
        """Every conversation in the source's locations, in no particular order."""
        ...

    def turns(self, conversation: Conversation, resume: Any | None, stats: ReadStats) -> Iterator[Turn]:
        """The conversation's turns after `resume` (a previous turn's `resume`; None: from the start).

        Complete turns in order, then at most one incomplete turn (the one still in progress),
        after which it stops. Each turn's `resume` is JSON-serialisable.
        """
        ...


def file_conversation(path: Path, key_prefix: str = "") -> Conversation | None:
    """A conversation for a transcript file; None when it vanished between listing and stat."""
    try:
        st = path.stat()
    except OSError:
        return None
    return Conversation(key=key_prefix + str(path), updated=st.st_mtime, size=st.st_size, handle=path)


def _guard_bytes(handle: Any, offset: int) -> bytes:
    start = max(0, offset - GUARD_BYTES)
    handle.seek(start)
    return bytes(handle.read(offset - start))


@dataclass
class Line:
    """One complete JSON line of a transcript: where it starts and ends, and what it holds."""

    start: int
    end: int
    obj: dict[str, Any]
    tail: bytes  # the GUARD_BYTES bytes before `end`

    def resume(self, ctx: dict[str, Any], seq: int) -> dict[str, Any]:
        """The resume point just after this line: offset, guard hash, the reader's context, next seq."""
        return {"offset": self.end, "guard": hashlib.sha256(self.tail).hexdigest(), "ctx": ctx, "seq": seq}


def resume_offset(path: Path, resume: dict[str, Any] | None) -> int:
    """Where read_jsonl starts: `resume`'s offset when the file still holds the same bytes before it, else 0."""
    if resume is None:
        return 0
    try:
        with path.open("rb") as handle:
            want = int(resume["offset"])
            if os.fstat(handle.fileno()).st_size < want:
                return 0
            guard = hashlib.sha256(_guard_bytes(handle, want)).hexdigest()
    except (OSError, KeyError, TypeError, ValueError):
        return 0
    return want if guard == resume.get("guard") else 0


def read_jsonl(path: Path, offset: int, stats: ReadStats) -> Iterator[Line]:
    """Each complete JSON-object line of `path` from byte `offset` (see resume_offset).

    The file is streamed line by line, never read whole. A last line without its newline is
    being written: reading stops before it. A complete line that is not a JSON object is
    counted in `stats.unreadable_lines` and skipped.
    """
    with path.open("rb") as handle:
        tail = _guard_bytes(handle, offset)
        handle.seek(offset)
        for raw in handle:
            start, offset = offset, offset + len(raw)
            if not raw.endswith(b"\n"):
                return
            tail = (tail + raw)[-GUARD_BYTES:]
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                stats.unreadable_lines += 1
                continue
            if isinstance(obj, dict):
                yield Line(start, offset, obj, tail)
            else:
                stats.unreadable_lines += 1


def iso_seconds(value: Any) -> float | None:
    """Unix seconds from an ISO 8601 string or epoch milliseconds/seconds; None when absent or unreadable."""
    from datetime import datetime

    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) / 1000.0 if value > 10_000_000_000 else float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def text_of(content: Any) -> str:
    """Plain text of a message content: a string, or a list of parts with `text` (others skipped)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str) and part.get("type") in (
                None, "text", "input_text", "output_text"
            ):
                out.append(part["text"])
        return "\n".join(p for p in out if p)
    return ""


def as_dict(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (formats change; a reader never crashes on shape)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """`value` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def compact_json(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(value)
