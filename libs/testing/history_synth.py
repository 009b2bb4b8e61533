"""Synthetic agent histories in each client's on-disk format, for the import benchmark and tests.

`write_history(home, source, turns, conversations, repo)` lays out `turns` complete turns (user
message, one tool call with its result, assistant reply) spread over `conversations`
conversations where the client keeps them under `home`. Files are written line by line, so a
50k-turn history costs no more memory to make than a small one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

T0 = 1_763_000_000  # Unix seconds of the first synthetic turn
TOPICS = ("billing", "search", "auth", "exports", "webhooks", "payments", "deploys", "alerts", "caching", "queues")


def _texts(i: int) -> tuple[str, str, str, str]:
    topic = TOPICS[i % len(TOPICS)]
    return (f"Turn {i}: why does the {topic} service need {i % 97} workers?",
            f"grep -rn workers config/{topic}.toml",
            f"config/{topic}.toml:workers = {i % 97}",
            f"The {topic} service runs {i % 97} workers because turn {i} measured its queue depth.")


def _iso(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _split(turns: int, conversations: int) -> Iterator[tuple[int, range]]:
    per = max(1, -(-turns // max(1, conversations)))
    for c, start in enumerate(range(0, turns, per)):
        yield c, range(start, min(turns, start + per))


def _line(out: TextIO, obj: dict[str, Any]) -> None:
    out.write(json.dumps(obj, separators=(",", ":")) + "\n")


def write_history(home: Path, source: str, turns: int, conversations: int, repo: Path) -> None:
    """Write a synthetic history of `source` under `home`; KeyError for an unknown source."""
    {"claude-code": _claude, "codex": _codex, "gemini-cli": _gemini, "opencode": _opencode,
     "cursor": _cursor, "vscode-copilot": _vscode}[source](home, turns, conversations, repo)


def _claude(home: Path, turns: int, conversations: int, repo: Path) -> None:
    folder = home / ".claude" / "projects" / "-synthetic"
    folder.mkdir(parents=True, exist_ok=True)
    for c, span in _split(turns, conversations):
        session = f"00000000-0000-4000-8000-{c:012d}"
        with (folder / f"{session}.jsonl").open("w", encoding="utf-8") as out:
            for i in span:
                user, cmd, result, reply = _texts(i)
                t = T0 + i * 60
                common = {"sessionId": session, "cwd": str(repo), "version": "2.1.197", "isSidechain": False}
                _line(out, {**common, "type": "user", "uuid": f"u{i}", "timestamp": _iso(t),
                            "message": {"role": "user", "content": user}})
                _line(out, {**common, "type": "assistant", "uuid": f"a{i}", "timestamp": _iso(t + 1),
                            "message": {"role": "assistant", "id": f"m{i}", "stop_reason": "tool_use", "content": [
                                {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": cmd}}]}})
                _line(out, {**common, "type": "user", "uuid": f"r{i}", "timestamp": _iso(t + 2), "message": {
                    "role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": result}]}})
                _line(out, {**common, "type": "assistant", "uuid": f"b{i}", "timestamp": _iso(t + 3),
                            "message": {"role": "assistant", "id": f"n{i}", "stop_reason": "end_turn",
                                        "content": [{"type": "text", "text": reply}]}})


def _codex(home: Path, turns: int, conversations: int, repo: Path) -> None:
    folder = home / ".codex" / "sessions" / "2026" / "11" / "12"
    folder.mkdir(parents=True, exist_ok=True)
    for c, span in _split(turns, conversations):
        session = f"019a0000-0000-7000-8000-{c:012d}"
        with (folder / f"rollout-2026-11-12T00-00-00-{session}.jsonl").open("w", encoding="utf-8") as out:
            _line(out, {"timestamp": _iso(T0), "type": "session_meta",
                        "payload": {"id": session, "cwd": str(repo), "cli_version": "0.171.0"}})
            for i in span:
                user, cmd, result, reply = _texts(i)
                t = T0 + i * 60
                for dt, kind, payload in (
                    (0, "event_msg", {"type": "user_message", "message": user}),
                    (1, "response_item", {"type": "function_call", "name": "shell", "call_id": f"c{i}",
                                          "arguments": json.dumps({"command": cmd.split()})}),
                    (2, "response_item", {"type": "function_call_output", "call_id": f"c{i}", "output": result}),
                    (3, "response_item", {"type": "message", "role": "assistant",
                                          "content": [{"type": "output_text", "text": reply}]}),
                    (3, "event_msg", {"type": "task_complete", "last_agent_message": reply}),
                ):
                    _line(out, {"timestamp": _iso(t + dt), "type": kind, "payload": payload})


def _gemini(home: Path, turns: int, conversations: int, repo: Path) -> None:
    folder = home / ".gemini" / "tmp" / "synthetic"
    (folder / "chats").mkdir(parents=True, exist_ok=True)
    (folder / ".project_root").write_text(str(repo), encoding="utf-8")
    for c, span in _split(turns, conversations):
        with (folder / "chats" / f"session-2026-11-12T00-00-{c:08x}.jsonl").open("w", encoding="utf-8") as out:
            _line(out, {"sessionId": f"gem-{c}", "projectHash": "synthetic", "startTime": _iso(T0),
                        "lastUpdated": _iso(T0)})
            for i in span:
                user, cmd, result, reply = _texts(i)
                t = T0 + i * 60
                _line(out, {"id": f"u{i}", "timestamp": _iso(t), "type": "user", "content": [{"text": user}]})
                call = {"id": f"tc{i}", "name": "run_shell_command", "args": {"command": cmd}, "status": "success",
                        "timestamp": _iso(t + 1), "resultDisplay": result}
                _line(out, {"id": f"g{i}", "timestamp": _iso(t + 1), "type": "gemini", "content": "",
                            "toolCalls": [call]})
                _line(out, {"id": f"h{i}", "timestamp": _iso(t + 3), "type": "gemini", "content": reply})


def _opencode(home: Path, turns: int, conversations: int, repo: Path) -> None:
    db = home / ".local" / "share" / "opencode" / "opencode.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db)
    conn.executescript(
        "CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT, directory TEXT, "
        "time_created INTEGER, time_updated INTEGER);"
        "CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, time_updated INTEGER, "
        "data TEXT);"
        "CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, time_created INTEGER, "
        "time_updated INTEGER, data TEXT);"
        "CREATE INDEX message_session_idx ON message (session_id, time_created, id);"
        "CREATE INDEX part_message_idx ON part (message_id, id);")
    for c, span in _split(turns, conversations):
        session = f"ses_{c:06d}"
        last = (T0 + span[-1] * 60 + 3) * 1000
        conn.execute("INSERT INTO session VALUES (?, 'prj', NULL, ?, ?, ?)", (session, str(repo), T0 * 1000, last))
        for i in span:
            user, cmd, result, reply = _texts(i)
            t = (T0 + i * 60) * 1000
            conn.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                         (f"msg_{i:08d}a", session, t, t, json.dumps({"role": "user", "time": {"created": t}})))
            conn.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                         (f"prt_{i:08d}a", f"msg_{i:08d}a", session, t, t, json.dumps({"type": "text", "text": user})))
            data = {"role": "assistant", "time": {"created": t + 1000, "completed": t + 3000}, "finish": "stop"}
            conn.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                         (f"msg_{i:08d}b", session, t + 1000, t + 3000, json.dumps(data)))
            tool = {"type": "tool", "tool": "bash", "callID": f"call{i}",
                    "state": {"status": "completed", "input": {"command": cmd}, "output": result}}
            conn.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                         (f"prt_{i:08d}b", f"msg_{i:08d}b", session, t + 1000, t + 1000, json.dumps(tool)))
            conn.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                         (f"prt_{i:08d}c", f"msg_{i:08d}b", session, t + 3000, t + 3000,
                          json.dumps({"type": "text", "text": reply})))
    conn.commit()
    conn.close()


def _cursor(home: Path, turns: int, conversations: int, repo: Path) -> None:
    db = home / ".config" / "Cursor" / "User" / "globalStorage" / "state.vscdb"
    db.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)")
    for c, span in _split(turns, conversations):
        composer = f"00000000-0000-4000-9000-{c:012d}"
        headers = []
        for i in span:
            user, cmd, result, reply = _texts(i)
            t = (T0 + i * 60) * 1000
            for suffix, bubble in (
                ("u", {"type": 1, "text": user, "createdAt": _iso(t / 1000)}),
                ("t", {"type": 2, "text": "", "createdAt": _iso(t / 1000 + 1), "toolFormerData": {
                    "name": "run_terminal_cmd", "rawArgs": json.dumps({"command": cmd}), "result": result,
                    "status": "completed"}}),
                ("a", {"type": 2, "text": reply, "createdAt": _iso(t / 1000 + 3)}),
            ):
                ident = f"{suffix}{i}"
                headers.append({"bubbleId": ident, "type": bubble["type"]})
                conn.execute("INSERT INTO cursorDiskKV VALUES (?, ?)",
                             (f"bubbleId:{composer}:{ident}", json.dumps({"bubbleId": ident, **bubble})))
        data = {"composerId": composer, "createdAt": T0 * 1000, "lastUpdatedAt": (T0 + span[-1] * 60 + 3) * 1000,
                "status": "completed", "workspaceUris": [],
                "workspaceIdentifier": {"id": f"{c:032x}", "uri": {"fsPath": str(repo), "scheme": "file"}},
                "fullConversationHeadersOnly": headers}
        conn.execute("INSERT INTO cursorDiskKV VALUES (?, ?)", (f"composerData:{composer}", json.dumps(data)))
    conn.commit()
    conn.close()


def _vscode(home: Path, turns: int, conversations: int, repo: Path) -> None:
    storage = home / ".config" / "Code" / "User" / "workspaceStorage" / "synthetic"
    (storage / "chatSessions").mkdir(parents=True, exist_ok=True)
    (storage / "workspace.json").write_text(json.dumps({"folder": repo.as_uri()}), encoding="utf-8")
    for c, span in _split(turns, conversations):
        session = f"00000000-0000-4000-a000-{c:012d}"
        with (storage / "chatSessions" / f"{session}.jsonl").open("w", encoding="utf-8") as out:
            _line(out, {"kind": 0, "v": {"version": 3, "sessionId": session, "creationDate": T0 * 1000,
                                         "requests": []}})
            for i in span:
                user, cmd, result, reply = _texts(i)
                request = {"requestId": f"request_{i}", "message": {"text": user}, "timestamp": (T0 + i * 60) * 1000,
                           "response": [{"kind": "toolInvocationSerialized", "toolId": "run_in_terminal",
                                         "invocationMessage": {"value": cmd}, "pastTenseMessage": {"value": result}},
                                        {"value": reply}],
                           "result": {"timings": {"totalElapsed": 3000}}, "modelState": {"value": 1}}
                _line(out, {"kind": 2, "k": ["requests"], "v": [request]})
