"""Each reader over its client's real on-disk format: turns, completion, ids, tools, projects, resume points."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from libs.history.base import ReadStats
from libs.history.engine import SourceReport, episode_of
from libs.history.sources import build_source
from libs.history.turns import Turn, render, turn_id
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
    from libs.history.turns import ToolStep

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
