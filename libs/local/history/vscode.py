"""VS Code Copilot chat sessions, read as VS Code's own source writes them (docs/import.md says which).

Where: `<Code user dir>/workspaceStorage/<workspace id>/chatSessions/<session>.jsonl` (or `.json`),
`globalStorage/emptyWindowChatSessions/` for a window with no folder, and in newer builds
`<profile>/globalStorage/chatSessions/<workspace id>/` (see session_dirs). Linux `~/.config/Code/User`,
macOS `~/Library/Application Support/Code/User`, and the Insiders folders. The workspace id's
`workspaceStorage/<id>/workspace.json` names the folder.

Since VS Code 1.109 a session file is an append-only mutation log (`ObjectMutationLog`): `kind` 0
`v` is the whole state, 1 sets `v` at key path `k`, 2 pushes the items of `v` onto the array at `k`
(creating it; first cutting it to length `i` when given), 3 deletes `k`. Earlier versions wrote
the state as one `.json` object. The state's `requests` are the turns: `requestId`, `message.text`
(a plain string in the oldest files), `timestamp` (ms), `response` (markdown, inline references and
`toolInvocationSerialized` parts), `result`, and `modelState` `{value, completedAt}`.
The log is replayed line by line, so memory grows with one session, never with the history.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

from echo_memory.libs.local.history.base import (
    Conversation,
    Line,
    ReadStats,
    as_dict,
    as_list,
    file_conversation,
    iso_seconds,
    read_jsonl,
)
from echo_memory.libs.local.history.turns import ToolStep, Turn

NAME = "vscode-copilot"
PRODUCTS = ("Code", "Code - Insiders")
# VS Code's ResponseModelState, stored as `modelState.value`
PENDING, COMPLETE, CANCELLED, FAILED, NEEDS_INPUT = 0, 1, 2, 3, 4
FINAL = frozenset({COMPLETE, CANCELLED, FAILED})


def default_user_dirs(home: Path, env: dict[str, str]) -> list[Path]:
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    elif sys.platform == "win32" and env.get("APPDATA"):
        base = Path(env["APPDATA"])
    else:
        base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    return [base / product / "User" for product in PRODUCTS]


def storage_folder(storage: Path) -> str | None:
    """The folder a workspace-storage directory belongs to (its `workspace.json` `folder` URI).

    Cursor, a VS Code fork, writes the same file; its reader uses this too.
    """
    try:
        data = json.loads((storage / "workspace.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    uri = data.get("folder") if isinstance(data, dict) else None  # a multi-root window has `workspace`
    if not isinstance(uri, str) or not uri.startswith("file://"):
        return None
    path = unquote(urlparse(uri).path)
    # VS Code writes Windows folders as `file:///c%3A/...`: no leading slash before the drive
    return path[1:] if len(path) > 2 and path[0] == "/" and path[2] == ":" and path[1].isalpha() else path


def _root_folder(chats: Path) -> str | None:
    """The project folder of a session directory, from the layout it is in."""
    if chats.name == "chatSessions":  # workspaceStorage/<workspace id>/chatSessions
        return storage_folder(chats.parent)
    if chats.parent.name == "chatSessions" and chats.parent.parent.name == "globalStorage":
        storage = chats.parent.parent.parent  # <User>, or <User>/profiles/<profile>
        user = storage.parent.parent if storage.parent.name == "profiles" else storage
        return storage_folder(user / "workspaceStorage" / chats.name)
    return None  # emptyWindowChatSessions: a window without a folder


def session_dirs(user: Path) -> list[Path]:
    """Every session directory under a Code user dir, the per-profile layout first.

    Newer VS Code keeps sessions in `<profile globalStorage>/chatSessions/<workspace id>/` and
    copies the older `workspaceStorage/<id>/chatSessions/` and `emptyWindowChatSessions/` files there.
    """
    storages = [user / "globalStorage", *sorted(user.glob("profiles/*/globalStorage"))]
    dirs = [d for s in storages for d in sorted((s / "chatSessions").glob("*")) if d.is_dir()]
    dirs += sorted((user / "workspaceStorage").glob("*/chatSessions"))
    dirs.append(user / "globalStorage" / "emptyWindowChatSessions")
    return dirs


class VSCodeCopilot:
    name = NAME

    def __init__(self, user_dirs: list[Path]) -> None:
        self.user_dirs = user_dirs

    def conversations(self) -> Iterator[Conversation]:
        for user in self.user_dirs:
            # VS Code copies sessions to a new folder (newer layout, another workspace) and keeps the
            # originals: of the files of one session, the one written last is read
            latest: dict[str, Conversation] = {}
            for chats in session_dirs(user):
                if not chats.is_dir():
                    continue
                cwd = _root_folder(chats)
                for path in sorted(chats.iterdir()):
                    # VS Code reads `<id>.jsonl` and falls back to `<id>.json` only when there is no log
                    legacy = path.suffix == ".json" and not path.with_suffix(".jsonl").exists()
                    conv = file_conversation(path) if path.suffix == ".jsonl" or legacy else None
                    if conv is not None:
                        conv.handle = (path, cwd)
                        kept = latest.get(path.stem)
                        if kept is None or conv.updated > kept.updated:
                            latest[path.stem] = conv
            yield from latest.values()

    def file(self, path: Path) -> Conversation:
        """One chat session file as a conversation (for `--file`); FileNotFoundError when it is gone."""
        conv = file_conversation(path)
        if conv is None:
            raise FileNotFoundError(path)
        conv.handle = (path, _root_folder(path.parent))
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
    if not keys or not isinstance(keys, list) or not all(isinstance(k, (str, int)) for k in keys):
        return state
    parent, leaf = _walk(state, keys[:-1]), keys[-1]
    in_list = isinstance(parent, list) and isinstance(leaf, int) and 0 <= leaf <= len(parent)
    if kind == 1:
        if isinstance(parent, dict):
            parent[leaf] = entry.get("v")
        elif in_list:
            parent[leaf:leaf + 1] = [entry.get("v")]
    elif kind == 2 and (isinstance(parent, dict) or in_list):
        target = _walk(state, keys)
        if target is None:  # VS Code pushes onto `current[key] || []`: a missing array is created
            target = []
            if isinstance(parent, dict):
                parent[leaf] = target
            else:
                parent[leaf:leaf + 1] = [target]
        if isinstance(target, list):
            if isinstance(entry.get("i"), int) and entry["i"] >= 0:
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


def _uri_name(uri: Any) -> str:
    """How VS Code writes a URI into a reply's text: a web address whole, anything else by its file name."""
    uri = as_dict(uri)
    scheme, path = str(uri.get("scheme") or ""), str(uri.get("path") or "")
    if scheme in ("http", "https"):
        query, fragment = uri.get("query"), uri.get("fragment")
        return f"{scheme}://{uri.get('authority') or ''}{path}" + (f"?{query}" if query else "") + \
            (f"#{fragment}" if fragment else "")
    return PurePosixPath(path).name


def _reply_text(part: Any) -> str:
    """The text a response part adds to the reply, as VS Code's `getMarkdown` collects it."""
    if isinstance(part, str):  # older files kept plain strings, which VS Code revives as markdown
        return part
    if not isinstance(part, dict):
        return ""
    kind = part.get("kind")
    if kind is None:  # a markdown string is stored bare: `{value, isTrusted, ...}`
        return part["value"] if isinstance(part.get("value"), str) else ""
    if kind in ("markdownContent", "markdownVuln"):
        return str(as_dict(part.get("content")).get("value") or "")
    if kind == "inlineReference":  # a file link or symbol in the middle of the text
        ref = as_dict(part.get("inlineReference"))
        if "uri" in ref:  # a location
            return _uri_name(ref["uri"])
        return f"`{ref['name']}`" if "name" in ref else _uri_name(ref)
    return ""  # thinking, progress, edits, confirmations...: not the reply


def _said(item: Any) -> str:
    """A message that is a markdown object (its `value`) or a plain string."""
    return str(item.get("value") or "") if isinstance(item, dict) else str(item or "")


def _tool_step(part: dict[str, Any]) -> ToolStep:
    """A `toolInvocationSerialized` part; VS Code keeps no call parameters, only what it showed."""
    data, details = as_dict(part.get("toolSpecificData")), part.get("resultDetails")
    line = as_dict(data.get("commandLine"))
    arguments, outputs = "", [_said(part.get("pastTenseMessage"))]
    if data.get("kind") == "terminal":  # VS Code shows the command line it ran, as the user last edited it
        arguments = str(line.get("userEdited") or line.get("toolEdited") or line.get("original") or data.get("command") or "")
        outputs.append(str(as_dict(data.get("terminalCommandOutput")).get("text") or ""))
    if isinstance(details, dict):  # `{input, output: [...]}`; `{output: {type: "data"}}` is base64 and left out
        arguments = arguments or (details["input"] if isinstance(details.get("input"), str) else "")
        outputs += [str(o.get("value") or "") for o in as_list(details.get("output"))
                    if isinstance(o, dict) and o.get("type") == "embed" and o.get("isText")]
    elif isinstance(details, list):  # the files (or locations) the tool touched
        outputs += [_uri_name(d.get("uri") if isinstance(d, dict) and "uri" in d else d) for d in details]
    result = "\n".join(o for o in outputs if o.strip())
    return ToolStep(name=str(part.get("toolId") or "tool"), arguments=arguments or _said(part.get("invocationMessage")),
                    result=result or None, call_id=part.get("toolCallId"))


def _response(turn: Turn, parts: Any) -> None:
    for part in [parts] if isinstance(parts, str) else as_list(parts):
        if isinstance(part, dict) and part.get("kind") == "toolInvocationSerialized":
            turn.tools.append(_tool_step(part))
        else:
            turn.reply += _reply_text(part)
    turn.reply = turn.reply.strip()


def response_state(request: dict[str, Any]) -> int | None:
    """The request's ResponseModelState (PENDING...NEEDS_INPUT); None when it has no response yet.

    A file older than `modelState` counts a request with a response as complete, or cancelled when
    `isCanceled`, as VS Code does on load; `Complete` with `result.errorDetails` (not `canceled`) is `Failed`.
    """
    state = as_dict(request.get("modelState")).get("value")
    if not isinstance(state, int):
        if all(request.get(k) in (None, "", 0, False) for k in ("response", "result", "responseErrorDetails")):
            return None
        state = CANCELLED if request.get("isCanceled") else COMPLETE
    errors = as_dict(as_dict(request.get("result")).get("errorDetails") or request.get("responseErrorDetails"))
    return FAILED if state == COMPLETE and errors and errors.get("code") != "canceled" else state


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
        message = request.get("message")  # a plain string in the oldest files
        text = message if isinstance(message, str) else str(as_dict(message).get("text") or "")
        ident = str(request.get("requestId") or f"request-{index}")
        when = iso_seconds(request.get("timestamp"))
        turn = Turn(source=NAME, conversation=session, first_message_id=ident, last_message_id=ident, user=text,
                    started_at=when, ended_at=when, cwd=cwd, seq=seq, model=request.get("modelId"))
        _response(turn, request.get("response"))
        response = response_state(request)
        # complete, cancelled and failed are final; pending and needs-input (a tool awaiting approval) are not
        turn.complete = response in FINAL or index < len(requests) - 1
        if response == CANCELLED:
            turn.extra["aborted"] = True
        elif response == FAILED:
            turn.extra["failed"] = True
        completed_at = as_dict(request.get("modelState")).get("completedAt")
        timings = as_dict(as_dict(request.get("result")).get("timings"))
        if isinstance(completed_at, (int, float)) and completed_at > 0:
            turn.ended_at = completed_at / 1000.0
        elif isinstance(timings.get("totalElapsed"), (int, float)) and when:
            turn.ended_at = when + timings["totalElapsed"] / 1000.0
        turn.resume = {"index": index + 1, "last_id": ident, "seq": seq + 1}
        if not text.strip():
            continue
        yield turn
        if not turn.complete:
            return
        seq += 1
