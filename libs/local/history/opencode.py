"""OpenCode sessions: SQLite `~/.local/share/opencode/opencode.db` (`XDG_DATA_HOME` moves `~/.local/share`).

Tables `session` (id, parent_id, directory, time_updated, …), `message` (id, session_id,
time_created, data JSON: role, time.created/completed, finish, modelID, path.cwd) and `part`
(id, message_id, session_id, data JSON: `text` {text, synthetic?}, `tool` {tool, callID, state:
{status, input, output}}, `reasoning`, `step-start`/`step-finish`, …), times in epoch ms.
A turn is a user message and the assistant messages after it; complete at the next user
message, or when its last assistant message has `time.completed` and a `finish` other than
`tool-calls`. Child sessions (subagents, `parent_id` set) are skipped. The older file store
(`storage/session|message|part/**.json`, before v1.2) is not read.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from echo_memory.libs.local.history.base import Conversation, ReadStats, as_dict, compact_json
from echo_memory.libs.local.history.sqlite_ro import open_readonly
from echo_memory.libs.local.history.turns import ToolStep, Turn

NAME = "opencode"
SESSIONS = "SELECT id, directory, time_updated FROM session WHERE parent_id IS NULL ORDER BY time_updated, id"
MESSAGES = """
SELECT id, time_created, data FROM message
WHERE session_id = ? AND (time_created > ? OR (time_created = ? AND id > ?))
ORDER BY time_created, id
"""
PARTS = "SELECT data FROM part WHERE message_id = ? ORDER BY id"


def default_root(home: Path, env: dict[str, str]) -> Path:
    base = Path(env["XDG_DATA_HOME"]) if env.get("XDG_DATA_HOME") else home / ".local" / "share"
    return base / "opencode"


class OpenCode:
    name = NAME

    def __init__(self, root: Path) -> None:
        self.db = root / "opencode.db"

    def conversations(self) -> Iterator[Conversation]:
        if not self.db.is_file():
            return
        conn = open_readonly(self.db)
        try:
            rows = conn.execute(SESSIONS).fetchall()
        finally:
            conn.close()
        for row in rows:
            yield Conversation(key=f"{self.db}#{row['id']}", updated=(row["time_updated"] or 0) / 1000.0,
                               handle=(row["id"], row["directory"]))

    def turns(self, conversation: Conversation, resume: Any | None, stats: ReadStats) -> Iterator[Turn]:
        session_id, directory = conversation.handle
        conn = open_readonly(self.db)
        try:
            yield from _turns(conn, session_id, directory, resume, stats)
        finally:
            conn.close()


def _data(raw: Any, stats: ReadStats) -> dict[str, Any]:
    try:
        value = json.loads(raw) if isinstance(raw, (str, bytes)) else raw
    except ValueError:
        stats.unreadable_lines += 1
        return {}
    return value if isinstance(value, dict) else {}


def _turns(
    conn: sqlite3.Connection, session_id: str, directory: str | None, resume: dict[str, Any] | None, stats: ReadStats
) -> Iterator[Turn]:
    after_time, after_id = (int(resume["time"]), str(resume["id"])) if resume else (-1, "")
    seq = int(resume.get("seq", 0)) if resume else 0
    turn: Turn | None = None
    done = False
    last_pos = (after_time, after_id)
    for row in conn.execute(MESSAGES, (session_id, after_time, after_time, after_id)):
        data = _data(row["data"], stats)
        parts = [_data(p["data"], stats) for p in conn.execute(PARTS, (row["id"],))]
        role = data.get("role")
        if role == "user":
            text = "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text" and not p.get("synthetic"))
            if not text.strip():
                continue
            if turn is not None:
                turn.complete = True
                turn.resume = {"time": last_pos[0], "id": last_pos[1], "seq": seq + 1}
                yield turn
                seq += 1
            cwd = (data.get("path") or {}).get("cwd") if isinstance(data.get("path"), dict) else None
            turn = Turn(source=NAME, conversation=session_id, first_message_id=row["id"], last_message_id=row["id"],
                        user=text, started_at=row["time_created"] / 1000.0, ended_at=row["time_created"] / 1000.0,
                        cwd=cwd or directory, seq=seq)
            done = False
        elif role == "assistant" and turn is not None:
            for part in parts:
                if part.get("type") == "text" and str(part.get("text", "")).strip() and not part.get("synthetic"):
                    turn.reply = f"{turn.reply}\n\n{part['text']}" if turn.reply else str(part["text"])
                elif part.get("type") == "tool":
                    state = as_dict(part.get("state"))
                    output = state.get("output") if state.get("status") == "completed" else state.get("error")
                    turn.tools.append(ToolStep(name=str(part.get("tool", "tool")), call_id=part.get("callID"),
                                               arguments=compact_json(state.get("input", {})),
                                               result=None if output is None else compact_json(output)))
            times = as_dict(data.get("time"))
            done = bool(times.get("completed")) and data.get("finish") not in (None, "tool-calls", "unknown")
            turn.model = data.get("modelID") or turn.model
            turn.ended_at = (times.get("completed") or row["time_created"]) / 1000.0
            turn.last_message_id = row["id"]
        else:
            continue
        last_pos = (row["time_created"], row["id"])
    if turn is not None:
        turn.complete = done
        turn.resume = {"time": last_pos[0], "id": last_pos[1], "seq": seq + 1}
        yield turn


