"""Codex CLI rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl` and `~/.codex/archived_sessions/`.

`CODEX_HOME` moves `~/.codex`. Each line is `{timestamp, type, payload}`: `session_meta` (id, cwd,
cli_version), `turn_context` (cwd, model), `response_item` (a `message`, `function_call` /
`custom_tool_call` / `local_shell_call` and their `*_output`, `reasoning`) and `event_msg`
(`user_message`, `agent_message`, `task_started`/`task_complete`, `turn_aborted`, …).
A turn starts at an `event_msg` `user_message` (the `response_item` user messages repeat it and
also carry injected context, so they are not used) and is complete at `task_complete` (or
`turn_complete`), `turn_aborted`, or the next user message. Rollout lines carry no message ids:
a turn's first message id is its line's timestamp and byte offset, stable in an append-only file.
"""

from __future__ import annotations

import os
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

NAME = "codex"
END_EVENTS = frozenset({"task_complete", "turn_complete"})
CALLS = {"function_call": "arguments", "custom_tool_call": "input", "local_shell_call": "action"}
OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})


def default_root(home: Path, env: dict[str, str]) -> Path:
    return Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"


class Codex:
    name = NAME

    def __init__(self, root: Path) -> None:
        self.root = root

    def conversations(self) -> Iterator[Conversation]:
        for folder in (self.root / "sessions", self.root / "archived_sessions"):
            if not folder.is_dir():
                continue
            for dirpath, _dirs, files in os.walk(folder):
                for name in sorted(files):
                    if name.startswith("rollout-") and name.endswith(".jsonl"):
                        conv = file_conversation(Path(dirpath) / name)
                        if conv is not None:
                            yield conv

    def file(self, path: Path) -> Conversation:
        """One transcript file as a conversation (for `--file`); FileNotFoundError when it is gone."""
        conv = file_conversation(path)
        if conv is None:
            raise FileNotFoundError(path)
        return conv

    def turns(self, conversation: Conversation, resume: Any | None, stats: ReadStats) -> Iterator[Turn]:
        return read_rollout(conversation.handle, resume, stats)


def _output_text(payload: dict[str, Any]) -> str:
    output = payload.get("output")
    if isinstance(output, dict):
        output = output.get("content", output)
    return text_of(output) or compact_json(output if output is not None else "")


def read_rollout(path: Path, resume: dict[str, Any] | None, stats: ReadStats) -> Iterator[Turn]:
    """The turns of one rollout file."""
    offset = resume_offset(path, resume)
    seq = int(resume.get("seq", 0)) if resume and offset else 0
    ctx: dict[str, Any] = dict(resume.get("ctx", {})) if resume and offset else {}
    ctx.setdefault("session", path.stem.split("-", 6)[-1] if path.stem.count("-") >= 6 else path.stem)
    turn: Turn | None = None
    last: Line | None = None
    by_call: dict[str, ToolStep] = {}
    for line in read_jsonl(path, offset, stats):
        kind, payload = line.obj.get("type"), line.obj.get("payload")
        if not isinstance(payload, dict):
            continue
        when = iso_seconds(line.obj.get("timestamp"))
        ptype = payload.get("type")
        if kind == "session_meta":
            ctx.update({k: v for k, v in (("session", payload.get("id")), ("cwd", payload.get("cwd")),
                                          ("version", payload.get("cli_version"))) if v})
            continue
        if kind == "turn_context":
            ctx.update({k: v for k, v in (("cwd", payload.get("cwd")), ("model", payload.get("model"))) if v})
            if turn is not None:
                turn.cwd = ctx.get("cwd") or turn.cwd
                turn.model = ctx.get("model") or turn.model
            continue
        if kind == "event_msg" and ptype == "user_message":
            if turn is not None and last is not None:
                turn.complete = True
                turn.resume = last.resume(dict(ctx), seq + 1)
                yield turn
                seq += 1
            turn = Turn(source=NAME, conversation=str(ctx["session"]),
                        first_message_id=f"{line.obj.get('timestamp')}#{line.start}",
                        last_message_id=f"{line.obj.get('timestamp')}#{line.start}",
                        user=str(payload.get("message", "")), started_at=when, ended_at=when,
                        cwd=ctx.get("cwd"), model=ctx.get("model"), seq=seq,
                        extra={"version": ctx.get("version")})
            by_call, last = {}, line
            continue
        if turn is None:
            continue
        if kind == "response_item":
            if ptype == "message" and payload.get("role") == "assistant":
                text = text_of(payload.get("content"))
                if text.strip():
                    turn.reply = f"{turn.reply}\n\n{text}" if turn.reply else text
            elif ptype in CALLS:
                step = ToolStep(name=str(payload.get("name") or ptype), call_id=str(payload.get("call_id")),
                                arguments=compact_json(payload.get(CALLS[ptype], "")))
                turn.tools.append(step)
                by_call[step.call_id or ""] = step
            elif ptype in OUTPUTS:
                answered = by_call.get(str(payload.get("call_id")))
                if answered is not None:
                    answered.result = _output_text(payload)
        elif kind == "event_msg" and (ptype in END_EVENTS or ptype == "turn_aborted"):
            if ptype == "turn_aborted":
                turn.extra["aborted"] = True
            turn.ended_at = when or turn.ended_at
            turn.last_message_id = f"{line.obj.get('timestamp')}#{line.start}"
            turn.complete = True
            turn.resume = line.resume(dict(ctx), seq + 1)
            yield turn
            seq += 1
            turn, last = None, None
            continue
        turn.ended_at = when or turn.ended_at
        turn.last_message_id = f"{line.obj.get('timestamp')}#{line.start}"
        last = line
    if turn is not None and last is not None:
        turn.complete = False  # no end marker yet: the turn is still running
        turn.resume = last.resume(dict(ctx), seq + 1)
        yield turn
