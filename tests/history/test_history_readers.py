"""Each reader over its client's real on-disk format: turns, completion, ids, tools, projects, resume points."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from echo_memory.libs.local.history.base import ReadStats
from echo_memory.libs.local.history.engine import SourceReport, episode_of
from echo_memory.libs.local.history.sources import build_source
from echo_memory.libs.local.history.turns import Turn, render, turn_id
from tests.history.history_fixtures import EXPECTED, SOURCES, install


def read_all(home: Path, name: str) -> list[Turn]:
    source = build_source(name, home, {})
    turns: list[Turn] = []
    for conv in source.conversations():
        turns += list(source.turns(conv, None, ReadStats()))
    return turns


@pytest.mark.parametrize("name", SOURCES)
def test_each_source_yields_its_complete_and_waiting_turns(tmp_path: Path, name: str) -> None:
    repo = install(tmp_path, (name,))
    turns = read_all(tmp_path, name)
    complete = [t for t in turns if t.complete]
    waiting = [t for t in turns if not t.complete]
    assert (len(complete), len(waiting)) == EXPECTED[name], [(t.user[:30], t.complete) for t in turns]
    assert all(t.source == name and t.user.strip() for t in turns)
    assert not any("<user_query>" in t.user or "<timestamp>" in t.user for t in turns), "the client's wrapping is cut"
    assert all(t.reply for t in complete if not t.extra.get("aborted")), [t.user for t in complete if not t.reply]
    ids = [t.id for t in turns]
    assert len(set(ids)) == len(ids)
    # the project is the git repository the turn ran in (a subdirectory's turns included); a
    # conversation its client kept without a folder (an empty VS Code window, an old Cursor chat) has none
    projects = {episode_of(t, SourceReport(name))["project"] for t in complete}  # type: ignore[index]
    assert projects == ({repo.name, None} if name in ("cursor", "vscode-copilot") else {repo.name})
    assert any(t.tools for t in complete), "every fixture has a turn with a tool call"
    json.dumps([t.resume for t in turns])  # resume points are stored as JSON


@pytest.mark.parametrize("name", SOURCES)
def test_reading_from_each_resume_point_gives_the_remaining_turns(tmp_path: Path, name: str) -> None:
    install(tmp_path, (name,))
    source = build_source(name, tmp_path, {})
    for conv in source.conversations():
        everything = list(source.turns(conv, None, ReadStats()))
        for i, turn in enumerate(everything):
            if not turn.complete:
                continue
            rest = list(source.turns(conv, turn.resume, ReadStats()))
            assert [t.id for t in rest] == [t.id for t in everything[i + 1:]]
            assert [t.seq for t in rest] == [t.seq for t in everything[i + 1:]]


def test_secrets_are_redacted_and_counted_before_anything_leaves_the_reader(tmp_path: Path) -> None:
    install(tmp_path)
    for name in SOURCES:
        report = SourceReport(name)
        episodes = [episode_of(t, report) for t in read_all(tmp_path, name) if t.complete]
        text = json.dumps(episodes)
        assert report.secrets_redacted >= 1 and report.turns_with_secrets >= 1, name
        for secret in ("AKIAQWERTYUIOPASDFGH", "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5", "Sup3rS3cretValue9",
                       "Cursor0ldPassw0rd9"):
            assert secret not in text, (name, secret)
        assert "[redacted " in text


def test_a_claude_turn_has_its_tool_call_result_and_reply_in_order(tmp_path: Path) -> None:
    install(tmp_path, ("claude-code",))
    first = read_all(tmp_path, "claude-code")[0]
    text, cut = render(first)
    assert cut == 0
    assert text.index("User: Which connection pool") < text.index("Tool call Grep") < text.index(
        "Tool result: config/billing.toml:pool_size = 20") < text.index("Assistant: The billing service")
    assert first.id == turn_id("claude-code", "11111111-aaaa-4aaa-8aaa-000000000001", "c1-u1")


def test_a_long_tool_output_is_shortened_with_a_marker_never_silently(tmp_path: Path) -> None:
    turn = Turn(source="codex", conversation="c", first_message_id="m", last_message_id="m", user="go",
                started_at=None, ended_at=None, reply="done", complete=True)
    from echo_memory.libs.local.history.turns import ToolStep

    turn.tools = [ToolStep(name="shell", arguments="ls", result="x" * 50_000)]
    text, cut = render(turn)
    assert cut == 50_000 - 1_200 and "more characters not imported" in text and len(text) < 20_000


def test_a_transcript_being_written_stops_before_its_unfinished_line(tmp_path: Path) -> None:
    install(tmp_path, ("claude-code",))
    path = next((tmp_path / ".claude" / "projects").rglob("2222*.jsonl"))
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"type":"user","uuid":"c2-u3","sessionId":"x","message":{"role":"user","content":"half')
    turns = read_all(tmp_path, "claude-code")
    assert "half" not in " ".join(t.user for t in turns)


def test_ids_never_exceed_the_store_limit() -> None:
    long = turn_id("vscode-copilot", "s" * 300, "r")
    assert len(long) <= 200 and long.startswith("vscode-copilot:sha256:")
    assert turn_id("codex", "a", "b") == "codex:a:b"
    assert os.path.basename(long) == long


# VS Code Copilot, in the shapes VS Code's own source writes (docs/import.md names the commits read)

def vscode_session(home: Path, entries: list[dict[str, object]], where: str = "workspaceStorage/ws1/chatSessions",
                   name: str = "s1.jsonl") -> Path:
    """A session file under `~/.config/Code/User/<where>`: a mutation log (.jsonl) or one object (.json)."""
    path = home / ".config" / "Code" / "User" / where / name
    path.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps(entries[0]) if path.suffix == ".json" else "".join(json.dumps(e) + "\n" for e in entries)
    path.write_text(body, encoding="utf-8")
    return path


def vscode_request(ident: str, text: str, **fields: object) -> dict[str, object]:
    return {"requestId": ident, "message": {"text": text, "parts": []}, "timestamp": 1763640010000, **fields}


def initial(*requests: dict[str, object], session: str = "s1") -> dict[str, object]:
    return {"kind": 0, "v": {"version": 3, "sessionId": session, "creationDate": 1763640000000, "requests": list(requests)}}


def test_vscode_a_push_onto_an_array_the_log_does_not_hold_yet_creates_it(tmp_path: Path) -> None:
    vscode_session(tmp_path, [
        initial(vscode_request("r1", "Why is the export slow?")),  # no `response` yet
        {"kind": 2, "k": ["requests", 0, "response"], "v": [{"value": "It builds the file in memory."}]},
        {"kind": 1, "k": ["requests", 0, "modelState"], "v": {"value": 1, "completedAt": 1763640015000}},
    ])
    [turn] = read_all(tmp_path, "vscode-copilot")
    assert turn.complete and turn.reply == "It builds the file in memory."


def test_vscode_cancelled_and_failed_responses_are_final_pending_and_needs_input_are_not(tmp_path: Path) -> None:
    done = {"value": 1, "completedAt": 1763640015000}
    vscode_session(tmp_path, [initial(
        vscode_request("r1", "first", response=[{"value": "partial"}], modelState={"value": 2, "completedAt": 1}),
        vscode_request("r2", "second", response=[], result={"errorDetails": {"message": "Rate limited"}},
                       modelState=done),
        vscode_request("r3", "third", response=[{"value": "ok"}], modelState={"value": 2, "completedAt": 1}),
    )])
    turns = read_all(tmp_path, "vscode-copilot")
    assert [(t.user, t.complete, t.extra) for t in turns] == [
        ("first", True, {"aborted": True}), ("second", True, {"failed": True}), ("third", True, {"aborted": True})]
    for waiting in (0, 4):  # pending; waiting for the user to approve a tool
        vscode_session(tmp_path, [initial(vscode_request("r1", "go", response=[], modelState={"value": waiting}))])
        assert [t.complete for t in read_all(tmp_path, "vscode-copilot")] == [False]


def test_vscode_a_turn_ends_when_its_model_state_says_it_completed(tmp_path: Path) -> None:
    vscode_session(tmp_path, [initial(vscode_request(
        "r1", "go", response=[{"value": "done"}], modelState={"value": 1, "completedAt": 1763640042000}))])
    [turn] = read_all(tmp_path, "vscode-copilot")
    assert (turn.started_at, turn.ended_at) == (1763640010.0, 1763640042.0)


def test_vscode_the_oldest_json_files_string_message_and_parts_and_no_model_state(tmp_path: Path) -> None:
    vscode_session(tmp_path, [{"sessionId": "old", "requests": [
        {"requestId": "r1", "message": "What does retry() do?", "response": ["It retries ", {"value": "with backoff."}]},
        {"requestId": "r2", "message": "Stop", "response": [{"value": "ok"}], "isCanceled": True},
    ]}], where="globalStorage/emptyWindowChatSessions", name="old.json")
    turns = read_all(tmp_path, "vscode-copilot")
    assert [(t.user, t.reply, t.complete, t.extra) for t in turns] == [
        ("What does retry() do?", "It retries with backoff.", True, {}), ("Stop", "ok", True, {"aborted": True})]


def test_vscode_reply_keeps_inline_references_and_vulnerability_markdown_but_not_thinking(tmp_path: Path) -> None:
    file_uri = {"$mid": 1, "scheme": "file", "path": "/projects/app/src/export.py"}
    vscode_session(tmp_path, [initial(vscode_request("r1", "where?", modelState={"value": 1, "completedAt": 1}, response=[
        {"kind": "thinking", "value": "let me look around"},
        {"value": "See "}, {"kind": "inlineReference", "inlineReference": file_uri},
        {"value": " and "}, {"kind": "inlineReference", "name": "x",
                             "inlineReference": {"name": "stream_rows", "kind": 12, "location": {"uri": file_uri}}},
        {"value": " in "}, {"kind": "inlineReference", "inlineReference": {"uri": file_uri, "range": {}}},
        {"kind": "markdownVuln", "content": {"value": "; fixed."}, "vulnerabilities": []},
    ]))])
    [turn] = read_all(tmp_path, "vscode-copilot")
    assert turn.reply == "See export.py and `stream_rows` in export.py; fixed."


def test_vscode_tool_calls_show_the_command_and_output_never_base64(tmp_path: Path) -> None:
    terminal = {"kind": "toolInvocationSerialized", "toolId": "run_in_terminal", "toolCallId": "t1", "isComplete": True,
                "invocationMessage": "Running `pytest`", "pastTenseMessage": "Ran `pytest`",
                "toolSpecificData": {"kind": "terminal", "language": "sh",
                                     "commandLine": {"original": "pytest", "userEdited": "pytest -q"},
                                     "terminalCommandOutput": {"text": "3 passed"}}}
    mcp = {"kind": "toolInvocationSerialized", "toolId": "mcp_search", "toolCallId": "t2", "isComplete": True,
           "invocationMessage": {"value": "Searching"}, "pastTenseMessage": None,
           "resultDetails": {"input": '{"q":"pool"}', "output": [{"type": "embed", "isText": True, "value": "pool=20"},
                                                               {"type": "embed", "value": "iVBORw0KGgo="}]}}
    image = {"kind": "toolInvocationSerialized", "toolId": "screenshot", "toolCallId": "t3", "isComplete": True,
             "invocationMessage": "Taking a screenshot", "pastTenseMessage": "Took a screenshot",
             "resultDetails": {"output": {"type": "data", "mimeType": "image/png", "base64Data": "iVBORw0KGgo="}}}
    vscode_session(tmp_path, [initial(vscode_request(
        "r1", "test it", response=[terminal, mcp, image, {"value": "All good."}], modelState={"value": 1, "completedAt": 1}))])
    [turn] = read_all(tmp_path, "vscode-copilot")
    assert [(s.name, s.arguments, s.result, s.call_id) for s in turn.tools] == [
        ("run_in_terminal", "pytest -q", "Ran `pytest`\n3 passed", "t1"),
        ("mcp_search", '{"q":"pool"}', "pool=20", "t2"),
        ("screenshot", "Taking a screenshot", "Took a screenshot", "t3"),
    ]


def test_vscode_sessions_in_per_profile_storage_are_read_and_stale_copies_skipped(tmp_path: Path) -> None:
    repo = tmp_path / "work" / "app"
    (repo / ".git").mkdir(parents=True)
    user = tmp_path / ".config" / "Code" / "User"
    for ws in ("ws1", "ws2"):
        (user / "workspaceStorage" / ws).mkdir(parents=True)
        (user / "workspaceStorage" / ws / "workspace.json").write_text(json.dumps({"folder": repo.as_uri()}))
    done = {"value": 1, "completedAt": 1}
    copied = [initial(vscode_request("r1", "copied", response=[{"value": "a"}], modelState=done))]
    moved = [initial(vscode_request("r1", "copied", response=[{"value": "a"}], modelState=done), session="s2")]
    # VS Code copies a session to its new place and leaves the original: the copy written last is read
    os.utime(vscode_session(tmp_path, copied), (1_000, 1_000))
    vscode_session(tmp_path, copied + [{"kind": 2, "k": ["requests"], "v": [vscode_request("r2", "later")]}],
                   where="globalStorage/chatSessions/ws1")
    os.utime(vscode_session(tmp_path, moved, where="workspaceStorage/ws2/chatSessions", name="s2.jsonl"), (1_000, 1_000))
    vscode_session(tmp_path, moved + [{"kind": 2, "k": ["requests"], "v": [vscode_request("r2", "moved on")]}],
                   where="workspaceStorage/ws1/chatSessions", name="s2.jsonl")
    vscode_session(tmp_path, [initial(vscode_request("r3", "profile", response=[{"value": "c"}], modelState=done),
                                      session="s3")],
                   where="profiles/p1/globalStorage/chatSessions/ws1", name="s3.jsonl")
    turns = read_all(tmp_path, "vscode-copilot")
    assert sorted((t.user, t.cwd, t.complete) for t in turns) == [
        ("copied", str(repo), True), ("copied", str(repo), True), ("later", str(repo), False),
        ("moved on", str(repo), False), ("profile", str(repo), True)]
    paths = sorted(str(c.handle[0]).split("/User/")[1] for c in build_source("vscode-copilot", tmp_path, {}).conversations())
    assert paths == ["globalStorage/chatSessions/ws1/s1.jsonl", "profiles/p1/globalStorage/chatSessions/ws1/s3.jsonl",
                     "workspaceStorage/ws1/chatSessions/s2.jsonl"]


def test_vscode_a_windows_folder_uri_becomes_a_drive_path(tmp_path: Path) -> None:
    vscode_session(tmp_path, [initial(vscode_request("r1", "go", response=[{"value": "ok"}], modelState={"value": 1}))])
    (tmp_path / ".config/Code/User/workspaceStorage/ws1/workspace.json").write_text(
        json.dumps({"folder": "file:///c%3A/Users/me/my%20app"}))
    [turn] = read_all(tmp_path, "vscode-copilot")
    assert turn.cwd == "c:/Users/me/my app"


# Cursor, in the shapes open-source readers of real installs show (docs/import.md names the sources)

CURSOR_USER = Path(".config") / "Cursor" / "User"


def cursor_kv(db: Path, table: str, rows: dict[str, object]) -> None:
    """Rows of a Cursor state database's key-value `table` (values JSON), created when missing."""
    db.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db)
    try:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)")
        conn.executemany(f"INSERT INTO {table} VALUES (?, ?)", [(k, json.dumps(v)) for k, v in rows.items()])
        conn.commit()
    finally:
        conn.close()


def cursor_composer(home: Path, composer: str, bubbles: list[dict[str, object]], **fields: object) -> None:
    """A composer of the global database with its bubbles stored one a row, as Cursor 0.43 and later do."""
    headers = [{"bubbleId": b["bubbleId"], "type": b["type"]} for b in bubbles]
    rows: dict[str, object] = {f"bubbleId:{composer}:{b['bubbleId']}": b for b in bubbles}
    rows[f"composerData:{composer}"] = {"_v": 10, "composerId": composer, "createdAt": 1763643600000,
                                       "status": "completed", "fullConversationHeadersOnly": headers, **fields}
    cursor_kv(home / CURSOR_USER / "globalStorage" / "state.vscdb", "cursorDiskKV", rows)


def asked_and_answered(prefix: str) -> list[dict[str, object]]:
    return [{"bubbleId": f"{prefix}1", "type": 1, "text": f"{prefix}: question", "createdAt": "2026-11-20T13:00:00Z"},
            {"bubbleId": f"{prefix}2", "type": 2, "text": f"{prefix}: answer", "createdAt": "2026-11-20T13:00:05Z"}]


def test_cursor_the_folder_comes_from_the_composers_workspace_or_the_workspace_database_that_lists_it(
        tmp_path: Path) -> None:
    repo = tmp_path / "work" / "app"
    (repo / ".git").mkdir(parents=True)
    storage = tmp_path / CURSOR_USER / "workspaceStorage"
    for ws in ("ws1", "ws2", "ws3"):
        (storage / ws).mkdir(parents=True)
        (storage / ws / "workspace.json").write_text(json.dumps({"folder": repo.as_uri()}))
    uri = {"$mid": 1, "fsPath": str(repo), "external": repo.as_uri(), "path": str(repo), "scheme": "file"}
    # Cursor 3.12 on: the composer names its workspace; `workspaceUris` is there but empty
    cursor_composer(tmp_path, "c-ident", asked_and_answered("a"), workspaceUris=[],
                    workspaceIdentifier={"id": "ws9", "uri": uri})
    cursor_composer(tmp_path, "c-ident-id", asked_and_answered("b"), workspaceIdentifier={"id": "ws3"})
    # before: the workspace's own database lists its composers, or its chat panes name them
    cursor_composer(tmp_path, "c-listed", asked_and_answered("c"))
    cursor_composer(tmp_path, "c-pane", asked_and_answered("d"))
    cursor_composer(tmp_path, "c-nowhere", asked_and_answered("e"))
    cursor_kv(storage / "ws1" / "state.vscdb", "ItemTable", {
        "composer.composerData": {"allComposers": [{"composerId": "c-listed", "name": "x"}],
                                  "selectedComposerIds": []}})
    cursor_kv(storage / "ws2" / "state.vscdb", "ItemTable", {
        "workbench.panel.composerChatViewPane.p1": {"workbench.panel.aichat.view.c-pane": {"collapsed": False}}})
    turns = read_all(tmp_path, "cursor")
    assert sorted((t.conversation, t.cwd) for t in turns) == [
        ("c-ident", str(repo)), ("c-ident-id", str(repo)), ("c-listed", str(repo)), ("c-nowhere", None),
        ("c-pane", str(repo))]


def test_cursor_a_message_kept_only_as_rich_text_is_read(tmp_path: Path) -> None:
    rich = {"root": {"type": "root", "children": [
        {"type": "paragraph", "children": [{"type": "text", "text": "Why does "},
                                           {"type": "text", "text": "login", "format": 16},
                                           {"type": "text", "text": " hang?"}]},
        {"type": "paragraph", "children": [{"type": "text", "text": "It started today."}]}]}}
    cursor_composer(tmp_path, "c1", [
        {"bubbleId": "u1", "type": 1, "text": "", "richText": json.dumps(rich), "createdAt": "2026-11-20T13:00:00Z"},
        {"bubbleId": "a1", "type": 2, "text": "The session lock.", "createdAt": "2026-11-20T13:00:05Z"},
        {"bubbleId": "u2", "type": 1, "text": "Thanks", "createdAt": "2026-11-20T13:01:00Z"},
    ])
    turns = read_all(tmp_path, "cursor")
    assert [(t.user, t.reply, t.complete) for t in turns] == [
        ("Why does login hang?\nIt started today.", "The session lock.", True), ("Thanks", "", False)]


def test_cursor_an_embedded_conversation_takes_what_its_bubble_rows_add(tmp_path: Path) -> None:
    db = tmp_path / CURSOR_USER / "globalStorage" / "state.vscdb"
    cursor_kv(db, "cursorDiskKV", {
        "composerData:c1": {"composerId": "c1", "createdAt": 1763643600000, "status": "completed", "conversation": [
            {"bubbleId": "u1", "type": 1, "text": "Where is the retry policy?"},
            {"bubbleId": "a1", "type": 2, "text": ""}]},
        "bubbleId:c1:a1": {"bubbleId": "a1", "type": 2, "text": "In net/retry.py.", "createdAt": "2026-11-20T13:00:05Z"},
    })
    [turn] = read_all(tmp_path, "cursor")
    assert (turn.user, turn.reply, turn.complete, turn.ended_at) == (
        "Where is the retry policy?", "In net/retry.py.", True, 1795179605.0)


def test_cursor_a_bubble_without_created_at_is_timed_from_its_client_timings(tmp_path: Path) -> None:
    cursor_composer(tmp_path, "c1", [
        # clientStartTime is milliseconds since the request began here, the others since the epoch
        {"bubbleId": "u1", "type": 1, "text": "go", "timingInfo": {"clientStartTime": 1234.5,
                                                                    "clientRpcSendTime": 1763643600250.5}},
        {"bubbleId": "a1", "type": 2, "text": "done", "timingInfo": {"clientStartTime": 1763643601000,
                                                                      "clientEndTime": 1763643609000}},
    ])
    [turn] = read_all(tmp_path, "cursor")
    assert (turn.started_at, turn.ended_at) == (1763643600.2505, 1763643601.0)


def test_cursor_the_oldest_composers_tool_calls_are_read_from_their_capabilities(tmp_path: Path) -> None:
    tool = {"tool": 15, "name": "run_terminal_cmd", "rawArgs": '{"command":"pytest -q"}', "result": "3 passed",
            "status": "completed"}
    cursor_composer(tmp_path, "c1", [
        {"bubbleId": "u1", "type": 1, "text": "run the tests", "createdAt": "2026-11-20T13:00:00Z"},
        {"bubbleId": "t1", "type": 2, "text": "", "capabilityType": 15, "createdAt": "2026-11-20T13:00:02Z"},
        {"bubbleId": "a1", "type": 2, "text": "All pass.", "createdAt": "2026-11-20T13:00:05Z"},
    ], _v=2, capabilities=[{"type": 15, "data": {"bubbleDataMap": json.dumps({"t1": tool})}}])
    [turn] = read_all(tmp_path, "cursor")
    assert [(s.name, s.arguments, s.result) for s in turn.tools] == [
        ("run_terminal_cmd", '{"command":"pytest -q"}', "3 passed")]
    assert (turn.reply, turn.complete) == ("All pass.", True)


def cursor_transcript(home: Path, slug: str, conversation: str, lines: list[dict[str, object]]) -> Path:
    path = home / ".cursor" / "projects" / slug / "agent-transcripts" / conversation / f"{conversation}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def said(role: str, *blocks: dict[str, object]) -> dict[str, object]:
    return {"role": role, "message": {"content": list(blocks)}}


def test_cursor_agent_prompt_is_its_user_query_and_its_timestamp_gives_the_time(tmp_path: Path) -> None:
    cursor_transcript(tmp_path, "home-me-app", "t1", [
        said("user", {"type": "text", "text": "<timestamp>Tuesday, Jul 21, 2026, 6:57 PM (UTC+8)</timestamp>\n"
                                              "<user_query>\nRename the flag\n</user_query>"}),
        said("assistant", {"type": "text", "text": "Renamed."}),
    ])
    [turn] = read_all(tmp_path, "cursor")
    assert (turn.user, turn.started_at, turn.complete) == ("Rename the flag", 1784631420.0, True)


def test_cursor_agent_folder_is_the_cwd_cursor_agent_recorded_not_the_lossy_slug(tmp_path: Path) -> None:
    repo = tmp_path / "work" / "my_app.v2"
    (repo / ".git").mkdir(parents=True)
    meta = tmp_path / ".cursor" / "chats" / "0f3c5e" / "t1" / "meta.json"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"cwd": str(repo), "createdAtMs": 1784631420000, "hasConversation": True}))
    slug = "-".join(part for part in str(repo).replace("_", "-").replace(".", "-").split("/") if part)
    cursor_transcript(tmp_path, slug, "t1", [said("user", {"type": "text", "text": "go"}),
                                             said("assistant", {"type": "text", "text": "ok"})])
    [turn] = read_all(tmp_path, "cursor")
    assert turn.cwd == str(repo)


def test_cursor_agent_turn_ended_completes_a_turn_whose_tool_call_was_left_unanswered(tmp_path: Path) -> None:
    cursor_transcript(tmp_path, "home-me-app", "t1", [
        said("user", {"type": "text", "text": "<user_query>\nDeploy\n</user_query>"}),
        said("assistant", {"type": "text", "text": "Deploying."},
             {"type": "tool_use", "name": "Shell", "input": {"command": "make deploy"}}),
        {"type": "turn_ended", "status": "aborted"},
    ])
    [turn] = read_all(tmp_path, "cursor")
    assert (turn.user, turn.complete, [s.name for s in turn.tools]) == ("Deploy", True, ["Shell"])
