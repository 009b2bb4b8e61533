"""Gemini CLI sessions: `~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl` (legacy whole-file `.json`).

Checked against google-gemini/gemini-cli packages/core/src/services/chatRecordingService.ts.
The first line is the metadata (`sessionId`, `projectHash`, `startTime`, …); then message
records `{id, timestamp, type: user|gemini|info|error|warning, content, toolCalls?}` are
appended, and a record whose id was seen before REPLACES that message (tool results and token
counts arrive that way); `{"$rewindTo": id}` drops that message and every later one; `{"$set":
{…}}` updates metadata. The project folder's `.project_root` file (or `~/.gemini/projects.json`)
names the working directory. A turn is a user message and the `gemini` messages after it;
complete at the next user message, or when its last message has text and no tool call that is
still running.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from echo_memory.libs.local.history.base import (
    Conversation,
    Line,
    ReadStats,
    compact_json,
    file_conversation,
    iso_seconds,
    read_jsonl,
    resume_offset,
    text_of,
)
from echo_memory.libs.local.history.turns import ToolStep, Turn

NAME = "gemini-cli"
DONE_TOOL = frozenset({"success", "error", "cancelled"})
MAX_REMEMBERED_IDS = 200


def default_root(home: Path, env: dict[str, str]) -> Path:
    return Path(env["GEMINI_CLI_HOME"]) / ".gemini" if env.get("GEMINI_CLI_HOME") else home / ".gemini"


class Gemini:
    name = NAME

    def __init__(self, root: Path) -> None:
        self.root = root
        self._roots: dict[str, str] | None = None

    def _project_roots(self) -> dict[str, str]:
        """slug → project root from `projects.json` (path → slug)."""
        if self._roots is None:
            self._roots = {}
            try:
                data = json.loads((self.root / "projects.json").read_text(encoding="utf-8"))
                self._roots = {slug: root for root, slug in (data.get("projects") or {}).items()}
            except (OSError, ValueError, AttributeError):
                pass
        return self._roots

    def conversations(self) -> Iterator[Conversation]:
        tmp = self.root / "tmp"
        if not tmp.is_dir():
            return
        for folder in sorted(tmp.iterdir()):
            chats = folder / "chats"
            if not chats.is_dir():
                continue
            cwd = None
            marker = folder / ".project_root"
            if marker.is_file():
                cwd = marker.read_text(encoding="utf-8").strip() or None
            cwd = cwd or self._project_roots().get(folder.name)
            for path in sorted(chats.glob("session-*.jsonl")):
                conv = file_conversation(path)
                if conv is not None:
                    conv.handle = (path, cwd)
                    yield conv

    def file(self, path: Path) -> Conversation:
        """One session file as a conversation (for `--file`); FileNotFoundError when it is gone."""
        conv = file_conversation(path)
        if conv is None:
            raise FileNotFoundError(path)
        marker = path.parent.parent / ".project_root"
        cwd = marker.read_text(encoding="utf-8").strip() if marker.is_file() else None
        conv.handle = (path, cwd or self._project_roots().get(path.parent.parent.name))
        return conv

    def turns(self, conversation: Conversation, resume: Any | None, stats: ReadStats) -> Iterator[Turn]:
        path, cwd = conversation.handle
        return read_session(path, cwd, resume, stats)


def _build(turn: Turn, messages: dict[str, dict[str, Any]]) -> bool:
    """Fill the turn's reply and tools from its gemini messages; True when it is finished."""
    turn.reply, turn.tools = "", []
    finished = False
    for msg in messages.values():
        text = text_of(msg.get("content")).strip()
        if text:
            turn.reply = f"{turn.reply}\n\n{text}" if turn.reply else text
        calls = msg.get("toolCalls") or []
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                result = call.get("resultDisplay") if isinstance(call.get("resultDisplay"), str) else None
                if result is None and call.get("result") is not None:
                    result = compact_json(call.get("result"))
                turn.tools.append(ToolStep(name=str(call.get("name", "tool")), call_id=str(call.get("id")),
                                           arguments=compact_json(call.get("args", {})), result=result))
        running = any(isinstance(c, dict) and c.get("status") not in DONE_TOOL for c in calls or [])
        finished = bool(text) and not running
        turn.model = msg.get("model") or turn.model
        turn.last_message_id = str(msg.get("id"))
        turn.ended_at = iso_seconds(msg.get("timestamp")) or turn.ended_at
    return finished


def read_session(path: Path, cwd: str | None, resume: dict[str, Any] | None, stats: ReadStats) -> Iterator[Turn]:
    offset = resume_offset(path, resume)
    seq = int(resume.get("seq", 0)) if resume and offset else 0
    ctx: dict[str, Any] = dict(resume.get("ctx", {})) if resume and offset else {}
    done = set(ctx.get("done", []))  # ids of messages already imported (their updates come later)
    turn: Turn | None = None
    messages: dict[str, dict[str, Any]] = {}
    last: Line | None = None

    def close(at: Line, complete: bool) -> Turn:
        assert turn is not None
        turn.complete = complete
        ids = [turn.first_message_id, *messages]
        ctx["done"] = [*[i for i in ctx.get("done", []) if i not in ids], *ids][-MAX_REMEMBERED_IDS:]
        turn.resume = at.resume(dict(ctx), seq + 1)
        return turn

    for line in read_jsonl(path, offset, stats):
        record = line.obj
        if "sessionId" in record and "projectHash" in record:
            ctx["session"] = record["sessionId"]
            continue
        if "$rewindTo" in record:
            target = str(record["$rewindTo"])
            if turn is not None and target == turn.first_message_id:
                turn, messages = None, {}  # the user took the prompt back
            elif target in messages:
                keys = list(messages)
                messages = {k: messages[k] for k in keys[: keys.index(target)]}
            continue
        if "$set" in record or not isinstance(record.get("id"), str):
            continue
        ident, mtype = record["id"], record.get("type")
        if ident in done:
            continue
        if mtype == "user":
            if turn is not None and ident == turn.first_message_id:
                turn.user = text_of(record.get("content")) or turn.user
                continue
            prompt = text_of(record.get("content"))
            if not prompt.strip():
                continue
            if turn is not None and last is not None:
                _build(turn, messages)
                yield close(last, True)
                seq += 1
            when = iso_seconds(record.get("timestamp"))
            turn = Turn(source=NAME, conversation=str(ctx.get("session") or path.stem), first_message_id=ident,
                        last_message_id=ident, user=prompt, started_at=when, ended_at=when, cwd=cwd, seq=seq)
            messages, last = {}, line
        elif mtype == "gemini" and turn is not None:
            messages[ident] = record
            last = line
    if turn is not None and last is not None:
        finished = _build(turn, messages)
        yield close(last, finished)
