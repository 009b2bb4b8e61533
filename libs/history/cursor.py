"""Cursor: the IDE's state database and the agent's JSON Lines transcripts (both undocumented by Cursor).

IDE: SQLite `<Cursor user dir>/globalStorage/state.vscdb` (Linux `~/.config/Cursor/User`, macOS
`~/Library/Application Support/Cursor/User`), table `cursorDiskKV`: `composerData:<id>` holds a
conversation (`fullConversationHeadersOnly`: its bubbles in order, `{bubbleId, type}`; older
versions embed the bubbles as `conversation`), `bubbleId:<composer>:<bubble>` one message
(`type` 1 = user, 2 = assistant; `text`; `toolFormerData` {name, rawArgs, result, status};
`createdAt`). Agent transcripts: `~/.cursor/projects/<path slug>/agent-transcripts/<id>/<id>.jsonl`
(or `<id>.jsonl`), lines `{role, message: {content: [text | tool_use | tool_result blocks]}}`
without ids or times, so a transcript turn's first message id is its line's byte offset. A
transcript whose id is also a conversation of the IDE database is read from the database only.
A turn is complete at the next user message, or when its last message is assistant text with
no tool call still running.
"""

from __future__ import annotations

import json
import re
import sqlite3
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
    resume_offset,
    text_of,
)
from libs.history.sqlite_ro import open_readonly
from libs.history.turns import ToolStep, Turn

NAME = "cursor"
COMPOSERS = "SELECT key, value FROM cursorDiskKV WHERE key LIKE 'composerData:%'"
BUBBLE = "SELECT value FROM cursorDiskKV WHERE key = ?"
USER_QUERY = re.compile(r"^\s*<user_query>\s*(.*?)\s*</user_query>\s*$", re.S)
RUNNING = frozenset({"loading", "running", "pending"})


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


class Cursor:
    name = NAME

    def __init__(self, user_dir: Path, dot_cursor: Path) -> None:
        self.db = user_dir / "globalStorage" / "state.vscdb"
        self.projects = dot_cursor / "projects"

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
        inline = as_list(data.get("conversation")) or None
        entries: list[Any] = headers if isinstance(headers, list) else (inline or [])
        start, seq = 0, 0
        if resume and 0 < int(resume.get("index", 0)) <= len(entries):
            mark = entries[int(resume["index"]) - 1]
            if isinstance(mark, dict) and str(mark.get("bubbleId")) == resume.get("last_id"):
                start, seq = int(resume["index"]), int(resume.get("seq", 0))
        cwd = _folder_of(data.get("workspaceUris"))
        turn: Turn | None = None
        running = False
        last_index = start
        for index in range(start, len(entries)):
            header = entries[index]
            if not isinstance(header, dict):
                continue
            bubble_id = str(header.get("bubbleId", ""))
            bubble = header if inline is not None else _loads(
                (conn.execute(BUBBLE, (f"bubbleId:{composer}:{bubble_id}",)).fetchone() or {"value": None})["value"])
            if not bubble:
                stats.skip("cursor bubble missing from the database")
                continue
            when = iso_seconds(bubble.get("createdAt"))
            text = str(bubble.get("text") or "")
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
                tool = bubble.get("toolFormerData")
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
        cwd = path_from_slug(slug) if slug else None
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
                    match = USER_QUERY.match(text)
                    if turn is not None and last is not None:
                        turn.complete = True
                        turn.resume = last.resume({}, seq + 1)
                        yield turn
                        seq += 1
                    turn = Turn(source=NAME, conversation=path.stem, first_message_id=f"L{line.start}",
                                last_message_id=f"L{line.start}", user=match.group(1) if match else text,
                                started_at=None, ended_at=mtime, cwd=cwd, seq=seq, extra={"cursor_project": slug})
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
            else:
                continue
            turn.last_message_id = f"L{line.start}"
            last = line
        if turn is not None and last is not None:
            turn.complete = awaiting == "nothing"
            turn.resume = last.resume({}, seq + 1)
            yield turn
