"""VS Code Copilot chat: `<Code user dir>/workspaceStorage/<hash>/chatSessions/<session>.jsonl` (and `.json`).

Also `globalStorage/emptyWindowChatSessions/` for chats of a window with no folder; Linux
`~/.config/Code/User`, macOS `~/Library/Application Support/Code/User` (and the Insiders
folders). Since VS Code 1.109 a session file is an append-only mutation log (VS Code's
`ObjectMutationLog`): `{"kind":0,"v":state}` the whole session, then `kind` 1 sets the value at
key path `k`, 2 pushes `v`'s items onto the array at `k` (first cutting it to length `i` when
given), 3 deletes `k`. Earlier versions wrote the state as one `.json` object. The state's
`requests` are the turns: `requestId`, `message.text`, `timestamp`, `response` (markdown parts
with `value`, `toolInvocationSerialized` parts), and `result` once the response finished (or
`modelState.value` 1 = complete). The hash folder's `workspace.json` names the folder.
The log is replayed line by line, so memory grows with one session, never with the history.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from libs.history.base import (
    Conversation,
    Line,
    ReadStats,
    as_dict,
    as_list,
    compact_json,
    file_conversation,
    iso_seconds,
    read_jsonl,
)
from libs.history.turns import ToolStep, Turn

NAME = "vscode-copilot"
PRODUCTS = ("Code", "Code - Insiders")
MARKDOWN_KINDS = frozenset({None, "markdownContent"})


def default_user_dirs(home: Path, env: dict[str, str]) -> list[Path]:
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    elif sys.platform == "win32" and env.get("APPDATA"):
        base = Path(env["APPDATA"])
    else:
        base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    return [base / product / "User" for product in PRODUCTS]


def _folder(storage: Path) -> str | None:
    try:
        data = json.loads((storage / "workspace.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    uri = data.get("folder") if isinstance(data, dict) else None
    return unquote(urlparse(uri).path) if isinstance(uri, str) and uri.startswith("file://") else None


class VSCodeCopilot:
    name = NAME

    def __init__(self, user_dirs: list[Path]) -> None:
        self.user_dirs = user_dirs

    def conversations(self) -> Iterator[Conversation]:
        for user in self.user_dirs:
            folders = [(p, _folder(p.parent)) for p in sorted((user / "workspaceStorage").glob("*/chatSessions"))]
            folders.append((user / "globalStorage" / "emptyWindowChatSessions", None))
            for chats, cwd in folders:
                if not chats.is_dir():
                    continue
                for path in sorted(chats.iterdir()):
                    legacy = path.suffix == ".json" and not path.with_suffix(".jsonl").exists()
                    if path.suffix == ".jsonl" or legacy:
                        conv = file_conversation(path)
                        if conv is not None:
                            conv.handle = (path, cwd)
                            yield conv

    def file(self, path: Path) -> Conversation:
        """One chat session file as a conversation (for `--file`); FileNotFoundError when it is gone."""
        conv = file_conversation(path)
        if conv is None:
            raise FileNotFoundError(path)
        conv.handle = (path, _folder(path.parent.parent))
        return conv

    def turns(self, conversation: Conversation, resume: Any | None, stats: ReadStats) -> Iterator[Turn]:
        path, cwd = conversation.handle
        state = replay(path, stats)
        return session_turns(state, path, cwd, resume)


def _walk(state: Any, path: list[Any]) -> Any:
    for key in path:
        in_list = isinstance(state, list) and isinstance(key, int) and -len(state) <= key < len(state)
        if in_list or (isinstance(state, dict) and key in state):
            state = state[key]
        else:
            return None
    return state


def apply(state: Any, entry: dict[str, Any]) -> Any:
    """The state after one mutation-log entry; an entry whose path does not exist is skipped."""
    kind, keys = entry.get("kind"), entry.get("k") or []
    if kind == 0:
        return entry.get("v")
    if not keys or not isinstance(keys, list):
        return state
    parent, leaf = _walk(state, keys[:-1]), keys[-1]
    if kind == 1:
        if isinstance(parent, dict):
            parent[leaf] = entry.get("v")
        elif isinstance(parent, list) and isinstance(leaf, int) and 0 <= leaf <= len(parent):
            parent[leaf:leaf + 1] = [entry.get("v")]
    elif kind == 2:
        target = _walk(state, keys)
        if isinstance(target, list):
            if isinstance(entry.get("i"), int):
                del target[entry["i"]:]
            target.extend(entry.get("v") or [])
    elif kind == 3 and isinstance(parent, dict):
        parent.pop(leaf, None)
    return state


def replay(path: Path, stats: ReadStats) -> dict[str, Any]:
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            stats.unreadable_lines += 1
            return {}
        return data if isinstance(data, dict) else {}
    state: Any = {}
    line: Line
    for line in read_jsonl(path, 0, stats):
        state = apply(state, line.obj)
    return state if isinstance(state, dict) else {}


def _response(turn: Turn, parts: Any) -> None:
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("kind")
        value = part.get("value")
        if kind in MARKDOWN_KINDS and isinstance(value, str) and value.strip():
            turn.reply = f"{turn.reply}{value}" if turn.reply else value
        elif kind == "toolInvocationSerialized":
            details = part.get("resultDetails")
            result = _said(part, "pastTenseMessage") or (compact_json(details) if details else None)
            turn.tools.append(ToolStep(name=str(part.get("toolId", "tool")), arguments=_said(part, "invocationMessage"),
                                       result=result or None, call_id=part.get("toolCallId")))


def _said(part: dict[str, Any], key: str) -> str:
    """A tool part's message: a markdown object's `value`, or a plain string."""
    item = part.get(key)
    return str(item.get("value", "")) if isinstance(item, dict) else str(item or "")


def session_turns(state: dict[str, Any], path: Path, cwd: str | None, resume: dict[str, Any] | None) -> Iterator[Turn]:
    session = str(state.get("sessionId") or path.stem)
    requests = as_list(state.get("requests"))
    start, seq = 0, 0
    if resume:
        index = int(resume.get("index", 0))
        if 0 < index <= len(requests) and isinstance(requests[index - 1], dict) and \
                requests[index - 1].get("requestId") == resume.get("last_id"):
            start, seq = index, int(resume.get("seq", 0))
    for index in range(start, len(requests)):
        request = requests[index]
        if not isinstance(request, dict):
            continue
        message = as_dict(request.get("message"))
        text = str(message.get("text") or "")
        ident = str(request.get("requestId") or f"request-{index}")
        when = iso_seconds(request.get("timestamp"))
        turn = Turn(source=NAME, conversation=session, first_message_id=ident, last_message_id=ident, user=text,
                    started_at=when, ended_at=when, cwd=cwd, seq=seq, model=request.get("modelId"))
        _response(turn, request.get("response"))
        model_state = as_dict(request.get("modelState"))
        finished = request.get("result") is not None or model_state.get("value") == 1
        turn.complete = finished or index < len(requests) - 1
        if isinstance(request.get("result"), dict):
            timings = request["result"].get("timings") or {}
            if isinstance(timings, dict) and isinstance(timings.get("totalElapsed"), (int, float)) and when:
                turn.ended_at = when + timings["totalElapsed"] / 1000.0
        turn.resume = {"index": index + 1, "last_id": ident, "seq": seq + 1}
        if not text.strip():
            continue
        yield turn
        if not turn.complete:
            return
        seq += 1
