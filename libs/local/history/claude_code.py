"""Claude Code transcripts: `~/.claude/projects/<cwd slug>/<session id>.jsonl` (`CLAUDE_CONFIG_DIR` moves `~/.claude`).

Each line is one entry with `type`, `uuid`, `sessionId`, `cwd`, `timestamp` and a `message` in
Anthropic Messages form. A `user` entry whose content is text (not only `tool_result` blocks, not
`isMeta`) starts a turn; `assistant` entries bring `text` and `tool_use` blocks (one block per
entry as they stream); `tool_result` blocks in later `user` entries answer a `tool_use` by id.
Sidechain entries (subagents) and bookkeeping entries (summary, system, snapshots) are skipped.
The turn is complete at the next prompt, or when its last entry is assistant text with no tool
call left unanswered.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from echo_memory.libs.local.history.base import (
    Conversation,
    Line,
    ReadStats,
    as_dict,
    compact_json,
    file_conversation,
    iso_seconds,
    read_jsonl,
    resume_offset,
    text_of,
)
from echo_memory.libs.local.history.turns import ToolStep, Turn

NAME = "claude-code"


def default_root(home: Path, env: dict[str, str]) -> Path:
    return Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home / ".claude"


class ClaudeCode:
    name = NAME

    def __init__(self, root: Path) -> None:
        self.root = root

    def conversations(self) -> Iterator[Conversation]:
        projects = self.root / "projects"
        if not projects.is_dir():
            return
        for folder in sorted(projects.iterdir()):
            if folder.is_dir():
                for path in sorted(folder.glob("*.jsonl")):  # subagents/ live one level deeper
                    conv = file_conversation(path)
                    if conv is not None:
                        yield conv

    def file(self, path: Path) -> Conversation:
        """One transcript file as a conversation (for `--file`); FileNotFoundError when it is gone."""
        conv = file_conversation(path)
        if conv is None:
            raise FileNotFoundError(path)
        return conv

    def turns(self, conversation: Conversation, resume: Any | None, stats: ReadStats) -> Iterator[Turn]:
        path: Path = conversation.handle
        return read_transcript(path, resume, stats)


def read_transcript(path: Path, resume: dict[str, Any] | None, stats: ReadStats) -> Iterator[Turn]:
    """The turns of one Claude Code transcript file (also the `--file` path of the capture hook)."""
    offset = resume_offset(path, resume)
    seq = int(resume.get("seq", 0)) if resume and offset else 0
    turn: Turn | None = None
    last: Line | None = None
    awaiting = "reply"  # what the open turn waits for: reply | tool_result | nothing (done)
    by_call: dict[str, ToolStep] = {}
    for line in read_jsonl(path, offset, stats):
        entry = line.obj
        kind = entry.get("type")
        if kind not in ("user", "assistant") or entry.get("isSidechain"):
            continue
        message = as_dict(entry.get("message"))
        content = message.get("content")
        if kind == "user":
            blocks = content if isinstance(content, list) else []
            results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
            prompt = text_of(content) if not results else ""
            if prompt.strip() and not entry.get("isMeta") and not entry.get("isCompactSummary"):
                if turn is not None and last is not None:
                    turn.complete = True  # the next prompt closes it, answered or not
                    turn.resume = last.resume({}, seq + 1)
                    yield turn
                    seq += 1
                turn = Turn(source=NAME, conversation=str(entry.get("sessionId") or path.stem),
                            first_message_id=str(entry.get("uuid") or f"L{line.start}"),
                            last_message_id=str(entry.get("uuid") or f"L{line.start}"), user=prompt,
                            started_at=iso_seconds(entry.get("timestamp")),
                            ended_at=iso_seconds(entry.get("timestamp")), cwd=entry.get("cwd"), seq=seq,
                            extra={"version": entry.get("version"), "git_branch": entry.get("gitBranch")})
                by_call, awaiting, last = {}, "reply", line
                continue
            if turn is None:
                continue  # the tail of a turn imported before
            for block in results:
                step = by_call.get(str(block.get("tool_use_id")))
                if step is not None:
                    step.result = compact_json(text_of(block.get("content")) or block.get("content") or "")
            if results:
                awaiting = "tool_result" if any(s.result is None for s in by_call.values()) else "reply"
        else:
            if turn is None:
                continue
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and str(block.get("text", "")).strip():
                    turn.reply = f"{turn.reply}\n\n{block['text']}" if turn.reply else str(block["text"])
                    awaiting = "nothing" if all(s.result is not None for s in by_call.values()) else "tool_result"
                elif block.get("type") == "tool_use":
                    step = ToolStep(name=str(block.get("name", "tool")), arguments=compact_json(block.get("input", {})),
                                    call_id=str(block.get("id")))
                    turn.tools.append(step)
                    by_call[str(block.get("id"))] = step
                    awaiting = "tool_result"
            turn.model = message.get("model") or turn.model
        if turn is not None:
            turn.last_message_id = str(entry.get("uuid") or turn.last_message_id)
            turn.ended_at = iso_seconds(entry.get("timestamp")) or turn.ended_at
            last = line
    if turn is not None and last is not None:
        turn.complete = awaiting == "nothing"
        turn.resume = last.resume({}, seq + 1)
        yield turn

