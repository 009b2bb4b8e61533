"""Cursor: the IDE's state database and the agent's JSON Lines transcripts (both undocumented by Cursor).

IDE: SQLite `<Cursor user dir>/globalStorage/state.vscdb` (Linux `~/.config/Cursor/User`, macOS
`~/Library/Application Support/Cursor/User`, Windows `%APPDATA%\\Cursor\\User`), table `cursorDiskKV`:
`composerData:<id>` holds a conversation (`fullConversationHeadersOnly`: its bubbles in order,
`{bubbleId, type}`; older versions embed the bubbles as `conversation`, their `bubbleId:` rows
holding what was added later), `bubbleId:<composer>:<bubble>` one message (`type` 1 = user,
2 = assistant; `text`, or only `richText`, the editor's JSON; `toolFormerData` {name, rawArgs,
result, status}, in the oldest composers (`_v` < 3) under the composer's `capabilities[].data.bubbleDataMap`
by bubble id instead; `createdAt`, in older bubbles only `timingInfo`). The folder of a conversation:
`workspaceIdentifier.uri` in the composer (Cursor 3.12 on), else the workspace whose own
`workspaceStorage/<id>/state.vscdb` lists the composer (`composer.composerData`, the chat panes),
named by that directory's `workspace.json`. Agent transcripts:
`~/.cursor/projects/<path slug>/agent-transcripts/<id>/<id>.jsonl` (or `<id>.jsonl`), lines
`{role, message: {content: [text | tool_use | tool_result blocks]}}` without ids, so a transcript
turn's first message id is its line's byte offset; a prompt is wrapped in `<user_query>`, with a
`<timestamp>` beside it, and `{type: "turn_ended"}` lines end a turn. Their folder is the `cwd`
of `~/.cursor/chats/<hash>/<id>/meta.json`, else rebuilt from the slug. A transcript whose id is
also a conversation of the IDE database is read from the database only. A turn is complete at
the next user message, at `turn_ended`, or when its last message is assistant text with no tool
call still running.
"""

from __future__ import annotations

import glob
import json
import re
import sqlite3
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from echo_memory.libs.local.history.base import (
    Conversation,
    Line,
    ReadStats,
    as_dict,
    as_list,
    compact_json,
    file_conversation,
    iso_seconds,
    read_jsonl,
    resume_offset,
    text_of,
)
from echo_memory.libs.local.history.sqlite_ro import open_readonly
from echo_memory.libs.local.history.turns import ToolStep, Turn
from echo_memory.libs.local.history.vscode import storage_folder

NAME = "cursor"
COMPOSERS = "SELECT key, value FROM cursorDiskKV WHERE key LIKE 'composerData:%'"
BUBBLE = "SELECT value FROM cursorDiskKV WHERE key = ?"
USER_QUERY = re.compile(r"<user_query>\s*(.*?)\s*</user_query>", re.S)
TIMESTAMP = re.compile(r"<timestamp>(.*?)</timestamp>\s*", re.S)
# how cursor-agent stamps a prompt: "Tuesday, Jul 21, 2026, 6:57 PM (UTC+8)"
STAMP = re.compile(r"([A-Za-z]{3})[a-z]* (\d{1,2}), (\d{4}), (\d{1,2}):(\d{2})\s*([AP]M)\s*"
                   r"\(UTC(?:([+-]\d{1,2})(?::?(\d{2}))?)?\)", re.I)
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
RUNNING = frozenset({"loading", "running", "pending"})
WORKSPACE_COMPOSERS = ("SELECT key, value FROM ItemTable WHERE key = 'composer.composerData' "
                       "OR key = 'workbench.panel.composerChatViewPane' "
                       "OR key LIKE 'workbench.panel.composerChatViewPane.%'")
CHAT_VIEW = "workbench.panel.aichat.view."
EPOCH_2000_MS = 946_684_800_000


def default_user_dir(home: Path, env: dict[str, str]) -> Path:
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Cursor" / "User"
    if sys.platform == "win32" and env.get("APPDATA"):
        return Path(env["APPDATA"]) / "Cursor" / "User"
    return (Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config") / "Cursor" / "User"


def path_from_slug(slug: str) -> str | None:
    """The existing directory a Cursor project slug names (`home-me-src-app` → `/home/me/src/app`).

    The slug replaced every `/` (and other separators) by `-`, so the path is rebuilt greedily
    from the directories that exist; None when no existing directory matches.
    """
    parts = [p for p in slug.split("-") if p]
    here = Path("/")
    i = 0
    while i < len(parts):
        for j in range(len(parts), i, -1):  # the longest existing name first (names may hold '-')
            candidate = here / "-".join(parts[i:j])
            if candidate.is_dir():
                here, i = candidate, j
                break
        else:
            return None
    return str(here) if i else None


def _loads(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw) if isinstance(raw, (str, bytes)) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _folder_of(uris: Any) -> str | None:
    for uri in uris if isinstance(uris, list) else []:
        if isinstance(uri, str) and uri.startswith("file://"):
            return unquote(urlparse(uri).path)
    return None


def _uri_path(uri: Any) -> str | None:
    """The local path of a serialized VS Code URI (`{scheme, fsPath, path, external}`); None for a remote one."""
    uri = as_dict(uri)
    if uri.get("scheme", "file") != "file":
        return None  # an SSH, WSL or container folder is not a path on this machine
    for key in ("fsPath", "path"):
        if isinstance(uri.get(key), str) and uri[key]:
            return str(uri[key])
    return _folder_of([uri.get("external")])


def _rich_text(raw: Any) -> str:
    """The plain text of a bubble's `richText` (the chat editor's state as JSON): a line per block."""
    root = as_dict((_loads(raw) if isinstance(raw, (str, bytes)) else as_dict(raw)).get("root"))

    def text(node: Any) -> str:
        node = as_dict(node)
        if node.get("type") == "linebreak":
            return "\n"
        own = node["text"] if isinstance(node.get("text"), str) else ""
        return own + "".join(text(child) for child in as_list(node.get("children")))

    return "\n".join(text(block) for block in as_list(root.get("children"))).strip()


def _bubble_text(bubble: dict[str, Any]) -> str:
    """What a bubble says: `text`, or, when Cursor kept only the editor's state, the text of `richText`."""
    return str(bubble.get("text") or "") or _rich_text(bubble.get("richText"))


def _bubble_time(bubble: dict[str, Any]) -> float | None:
    """Unix seconds a bubble was written: `createdAt`, else its client timings (older bubbles have only those)."""
    when = iso_seconds(bubble.get("createdAt"))
    if when is not None:
        return when
    timing = as_dict(bubble.get("timingInfo"))
    for key in ("clientStartTime", "clientRpcSendTime", "clientSettleTime", "clientEndTime"):
        value = timing.get(key)
        # clientStartTime is at times milliseconds since the request began, not since the epoch
        if isinstance(value, (int, float)) and value >= EPOCH_2000_MS:
            return float(value) / 1000.0
    return None


def _stamp_seconds(stamp: str) -> float | None:
    """Unix seconds of a cursor-agent prompt stamp (minute resolution); None when it has another shape."""
    match = STAMP.search(stamp)
    if not match or match.group(1).lower() not in MONTHS:
        return None
    month, day, year, hour, minute = (MONTHS.index(match.group(1).lower()) + 1, int(match.group(2)),
                                      int(match.group(3)), int(match.group(4)) % 12, int(match.group(5)))
    hours = int(match.group(7) or 0)
    offset = timedelta(hours=hours, minutes=int(match.group(8) or 0) * (-1 if hours < 0 else 1))
    try:
        when = datetime(year, month, day, hour + (12 if match.group(6).upper() == "PM" else 0), minute,
                        tzinfo=timezone(offset))
    except ValueError:
        return None
    return when.timestamp()


def _prompt(text: str) -> tuple[str, float | None]:
    """A transcript prompt without Cursor's wrapping (`<user_query>`, `<timestamp>`), and its stamp's time."""
    stamp = TIMESTAMP.search(text)
    bare = TIMESTAMP.sub("", text)
    match = USER_QUERY.search(bare)
    return (match.group(1) if match else bare.strip()), (_stamp_seconds(stamp.group(1)) if stamp else None)


def _capability_tools(data: dict[str, Any]) -> dict[str, Any]:
    """Bubble id → tool call, as the oldest composers keep them (`capabilities[].data.bubbleDataMap`, a JSON string)."""
    tools: dict[str, Any] = {}
    for capability in as_list(data.get("capabilities")):
        raw = as_dict(as_dict(capability).get("data")).get("bubbleDataMap")
        tools.update(_loads(raw) if isinstance(raw, (str, bytes)) else as_dict(raw))
    return tools


def _workspace_composer_ids(db: Path) -> list[str]:
    """The composers a workspace's own state database lists: `composer.composerData` (`allComposers`,
    the open `selectedComposerIds`) and the chat panes' `workbench.panel.aichat.view.<composer>` keys."""
    try:
        conn = open_readonly(db)
        try:
            rows = conn.execute(WORKSPACE_COMPOSERS).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return []  # a workspace database Cursor is rewriting, or one without the key-value table
    ids: list[str] = []
    for row in rows:
        value = _loads(row["value"])
        if row["key"] == "composer.composerData":
            ids += [str(c["composerId"]) for c in as_list(value.get("allComposers"))
                    if isinstance(c, dict) and c.get("composerId")]
            ids += [str(c) for c in as_list(value.get("selectedComposerIds")) if isinstance(c, str)]
        else:
            ids += [key[len(CHAT_VIEW):] for key in value if key.startswith(CHAT_VIEW)]
    return ids


class Cursor:
    name = NAME

    def __init__(self, user_dir: Path, dot_cursor: Path) -> None:
        self.db = user_dir / "globalStorage" / "state.vscdb"
        self.workspaces = user_dir / "workspaceStorage"
        self.projects = dot_cursor / "projects"
        self.chats = dot_cursor / "chats"
        self._by_workspace: dict[str, str] | None = None

    def _folder(self, composer: str, data: dict[str, Any]) -> str | None:
        """The folder a conversation of the IDE was held in; None when Cursor kept none (an empty window)."""
        ident = as_dict(data.get("workspaceIdentifier"))
        ident_id = ident.get("id")
        return (_folder_of(data.get("workspaceUris")) or _uri_path(ident.get("uri"))
                or (storage_folder(self.workspaces / ident_id)
                    if isinstance(ident_id, str) and ident_id.isalnum() else None)
                or self._workspace_folders().get(composer))

    def _workspace_folders(self) -> dict[str, str]:
        """Composer id → folder, from the workspaces' own databases (how Cursor before 3.12 tied a
        conversation to its folder); read once per reader, the first workspace listing a composer wins."""
        if self._by_workspace is None:
            self._by_workspace = {}
            for db in sorted(self.workspaces.glob("*/state.vscdb")):
                folder = storage_folder(db.parent)
                if folder is not None:
                    for composer in _workspace_composer_ids(db):
                        self._by_workspace.setdefault(composer, folder)
        return self._by_workspace

    def _agent_cwd(self, conversation: str) -> str | None:
        """The folder cursor-agent recorded for a chat (`~/.cursor/chats/<hash>/<id>/meta.json` `cwd`):
        exact, where the project slug loses which `-` were `/`, `_`, `.` or spaces."""
        for meta in sorted(self.chats.glob(f"*/{glob.escape(conversation)}/meta.json")):
            try:
                cwd = as_dict(json.loads(meta.read_text(encoding="utf-8"))).get("cwd")
            except (OSError, ValueError):
                continue
            if isinstance(cwd, str) and cwd:
                return cwd
        return None

    def conversations(self) -> Iterator[Conversation]:
        in_db: set[str] = set()
        if self.db.is_file():
            conn = open_readonly(self.db)
            try:
                rows = conn.execute(COMPOSERS).fetchall()
            except sqlite3.OperationalError:
                rows = []  # a state database without Cursor's key-value table
            finally:
                conn.close()
            for row in rows:
                data = _loads(row["value"])
                composer = str(data.get("composerId") or row["key"].split(":", 1)[1])
                in_db.add(composer)
                updated = iso_seconds(data.get("lastUpdatedAt") or data.get("createdAt")) or 0.0
                yield Conversation(key=f"{self.db}#{composer}", updated=updated, handle=("db", composer))
        if self.projects.is_dir():
            for path in sorted(self.projects.glob("*/agent-transcripts/**/*.jsonl")):
                if path.stem in in_db:
                    continue
                conv = file_conversation(path)
                if conv is not None:
                    conv.handle = ("transcript", path)
                    yield conv

    def file(self, path: Path) -> Conversation:
        """One agent transcript as a conversation (for `--file`); FileNotFoundError when it is gone."""
        conv = file_conversation(path)
        if conv is None:
            raise FileNotFoundError(path)
        conv.handle = ("transcript", path)
        return conv

    def turns(self, conversation: Conversation, resume: Any | None, stats: ReadStats) -> Iterator[Turn]:
        kind, ref = conversation.handle
        if kind == "transcript":
            yield from self._transcript(ref, resume, stats)
            return
        conn = open_readonly(self.db)
        try:
            yield from self._composer(conn, ref, resume, stats)
        finally:
            conn.close()

    # ---- IDE database ----------------------------------------------------------------------

    def _composer(
        self, conn: sqlite3.Connection, composer: str, resume: dict[str, Any] | None, stats: ReadStats
    ) -> Iterator[Turn]:
        row = conn.execute(BUBBLE, (f"composerData:{composer}",)).fetchone()
        data = _loads(row["value"]) if row else {}
        headers = data.get("fullConversationHeadersOnly")
        inline = None if isinstance(headers, list) and headers else (as_list(data.get("conversation")) or None)
        entries: list[Any] = inline if inline is not None else as_list(headers)
        start, seq = 0, 0
        if resume and 0 < int(resume.get("index", 0)) <= len(entries):
            mark = entries[int(resume["index"]) - 1]
            if isinstance(mark, dict) and str(mark.get("bubbleId")) == resume.get("last_id"):
                start, seq = int(resume["index"]), int(resume.get("seq", 0))
        cwd = self._folder(composer, data)
        turn: Turn | None = None
        running = False
        last_index = start
        old_tools = _capability_tools(data)
        for index in range(start, len(entries)):
            header = entries[index]
            if not isinstance(header, dict):
                continue
            bubble_id = str(header.get("bubbleId", ""))
            row = _loads((conn.execute(BUBBLE, (f"bubbleId:{composer}:{bubble_id}",)).fetchone() or {"value": None})["value"])
            # an embedded bubble's own row, where there is one, holds what Cursor added after embedding it
            bubble = {**header, **{k: v for k, v in row.items() if v not in (None, "")}} if inline is not None else row
            if not bubble:
                stats.skip("cursor bubble missing from the database")
                continue
            when = _bubble_time(bubble)
            text = _bubble_text(bubble)
            if bubble.get("type", header.get("type")) == 1:
                if not text.strip():
                    continue
                if turn is not None:
                    turn.complete = True
                    turn.resume = {"index": last_index, "last_id": turn.last_message_id, "seq": seq + 1}
                    yield turn
                    seq += 1
                turn = Turn(source=NAME, conversation=composer, first_message_id=bubble_id, last_message_id=bubble_id,
                            user=text, started_at=when, ended_at=when,
                            cwd=cwd or _folder_of(bubble.get("workspaceUris")), seq=seq)
                running = False
            elif turn is not None:
                tool = bubble.get("toolFormerData") or old_tools.get(bubble_id)
                if isinstance(tool, dict) and tool.get("name"):
                    result = tool.get("result")
                    turn.tools.append(ToolStep(name=str(tool["name"]), arguments=compact_json(tool.get("rawArgs", "")),
                                               result=None if result is None else compact_json(result)))
                    running = tool.get("status") in RUNNING
                if text.strip():
                    turn.reply = f"{turn.reply}\n\n{text}" if turn.reply else text
                    running = running and isinstance(tool, dict)
                turn.last_message_id = bubble_id
                turn.ended_at = when or turn.ended_at
            else:
                continue
            last_index = index + 1
        if turn is not None:
            turn.complete = bool(turn.reply) and not running and data.get("status") != "generating"
            turn.resume = {"index": last_index, "last_id": turn.last_message_id, "seq": seq + 1}
            yield turn

    # ---- agent transcripts -----------------------------------------------------------------

    def _transcript(self, path: Path, resume: dict[str, Any] | None, stats: ReadStats) -> Iterator[Turn]:
        offset = resume_offset(path, resume)
        seq = int(resume.get("seq", 0)) if resume and offset else 0
        try:
            slug: str | None = path.relative_to(self.projects).parts[0]
        except ValueError:
            slug = None  # a transcript outside ~/.cursor/projects (given with --file)
        cwd = self._agent_cwd(path.stem) or (path_from_slug(slug) if slug else None)
        mtime = path.stat().st_mtime
        turn: Turn | None = None
        last: Line | None = None
        awaiting = "reply"
        for line in read_jsonl(path, offset, stats):
            role = line.obj.get("role")
            message = as_dict(line.obj.get("message"))
            blocks = as_list(message.get("content"))
            if role == "user":
                results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
                text = text_of(blocks if blocks else message.get("content"))
                if text.strip() and not results:
                    prompt, stamped = _prompt(text)
                    if turn is not None and last is not None:
                        turn.complete = True
                        turn.resume = last.resume({}, seq + 1)
                        yield turn
                        seq += 1
                    turn = Turn(source=NAME, conversation=path.stem, first_message_id=f"L{line.start}",
                                last_message_id=f"L{line.start}", user=prompt, started_at=stamped,
                                ended_at=mtime, cwd=cwd, seq=seq, extra={"cursor_project": slug})
                    awaiting, last = "reply", line
                    continue
                if turn is None:
                    continue
                pending = [s for s in turn.tools if s.result is None]
                for block, step in zip(results, pending, strict=False):
                    step.result = text_of(block.get("content")) or compact_json(block.get("content", ""))
                awaiting = "tool_result" if any(s.result is None for s in turn.tools) else "reply"
            elif role == "assistant" and turn is not None:
                for block in blocks:
                    if not isinstance(block, dict):
                        continue
                    if block.get("type") == "text" and str(block.get("text", "")).strip():
                        turn.reply = f"{turn.reply}\n\n{block['text']}" if turn.reply else str(block["text"])
                        awaiting = "nothing"
                    elif block.get("type") == "tool_use":
                        turn.tools.append(ToolStep(name=str(block.get("name", "tool")),
                                                   arguments=compact_json(block.get("input", {}))))
                        awaiting = "tool_result"
            elif line.obj.get("type") == "turn_ended" and turn is not None:
                awaiting = "nothing"  # the agent's own end of the turn, also after a tool call it left unanswered
            else:
                continue
            turn.last_message_id = f"L{line.start}"
            last = line
        if turn is not None and last is not None:
            turn.complete = awaiting == "nothing"
            turn.resume = last.resume({}, seq + 1)
            yield turn
