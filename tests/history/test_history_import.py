"""`echo-memory import` end to end: the real CLI process, bus, writes service, Postgres and MCP client."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import psycopg

from echo_memory.libs.local.history.engine import BATCH_TURNS
from echo_memory.libs.local.history.state import state_path
from echo_memory.libs.testing import EchoStack
from tests.history.history_fixtures import EXPECTED, install

ROOT = Path(__file__).resolve().parents[2]
TOTAL = sum(complete for complete, _ in EXPECTED.values())
SECRETS = ("AKIAQWERTYUIOPASDFGH", "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5", "Sup3rS3cretValue9", "Cursor0ldPassw0rd9")


def env_for(stack: EchoStack, home: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_MEMORY_", "XDG_", "CLAUDE_", "CODEX_"))}
    return {**keep, "HOME": str(home), "ECHO_MEMORY_HOME": str(home / "echo"), "ECHO_MEMORY_NATS_URL": stack.nats_url,
            "ECHO_MEMORY_ORG": stack.org}


async def run(env: dict[str, str], *args: str) -> tuple[int, list[dict[str, Any]], str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "echo_memory.libs.local.cli", "import", "--json", *args, env=env, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=240)
    reports = json.loads(out) if out.strip() else []
    return proc.returncode or 0, reports, err.decode()


def by_source(reports: list[dict[str, Any]], key: str) -> dict[str, int]:
    """`key` of each source that had any conversation (sources with no files at all are left out)."""
    return {r["source"]: r[key] for r in reports if r["conversations"] or r["unchanged"]}


def imported_rows(stack: EchoStack) -> list[tuple[Any, ...]]:
    with psycopg.connect(stack.database_url) as conn:
        return conn.execute(
            "SELECT agent_id, tool, project, session_id, content, metadata->>'source', metadata->>'external_id', seq "
            "FROM episodes WHERE metadata ? 'external_id' ORDER BY occurred_at").fetchall()


async def test_import_stores_each_complete_turn_once_and_a_rerun_stores_nothing(stack: EchoStack, tmp_path: Path) -> None:
    install(tmp_path)
    env = env_for(stack, tmp_path)

    code, dry, err = await run(env, "--dry-run")
    assert code == 0, err
    assert by_source(dry, "turns") == {s: c for s, (c, _) in EXPECTED.items()}
    assert by_source(dry, "waiting") == {s: w for s, (_, w) in EXPECTED.items()}
    assert imported_rows(stack) == [] and not state_path(tmp_path / "echo").exists(), "a dry run writes nothing"
    assert "would be imported" in err

    code, first, err = await run(env)
    assert code == 0, err
    assert by_source(first, "imported") == {s: c for s, (c, _) in EXPECTED.items()}
    assert all(r["secrets_redacted"] >= 1 for r in first), first
    assert "secrets redacted" in err and "conversations" in err
    rows = imported_rows(stack)
    assert len(rows) == TOTAL and len({r[6] for r in rows}) == TOTAL
    assert {r[0] for r in rows} == set(EXPECTED), "agent = the client that had the conversation"
    assert {r[1] for r in rows} == {"echo-memory import"}
    assert {r[0] for r in rows if r[2] == "app"} == set(EXPECTED), "project = the git repository's name"
    assert all(r[5] == r[0] and r[6].startswith(f"{r[0]}:") for r in rows)
    stored = json.dumps([list(map(str, r)) for r in rows])
    assert not any(secret in stored for secret in SECRETS)

    code, second, err = await run(env)
    assert code == 0, err
    assert sum(by_source(second, "imported").values()) == 0 and sum(by_source(second, "turns").values()) == 0
    assert len(imported_rows(stack)) == TOTAL

    # Without its checkpoints (a lost data directory) every turn is read again, and the store's
    # turn ids still keep it from storing any twice.
    state_path(tmp_path / "echo").unlink()
    code, again, err = await run(env)
    assert code == 0, err
    assert sum(by_source(again, "imported").values()) == 0
    assert sum(by_source(again, "already").values()) == TOTAL
    assert len(imported_rows(stack)) == TOTAL

    # Raw turns are searchable at once, through the MCP edge.
    async with stack.client(stack.issue_token("reader")) as client:
        found = await client.call_tool("query_memory", {"query": "webhook sender retry backoff",
                                                        "include_episodes": True})
    assert not found.is_error, found.content
    assert any("retry three times" in item["text"] for item in found.structured_content["results"])


async def test_a_turn_cut_by_the_last_run_is_imported_whole_when_it_finishes(stack: EchoStack, tmp_path: Path) -> None:
    install(tmp_path, ("claude-code",))
    env = env_for(stack, tmp_path)
    code, first, err = await run(env)
    assert code == 0 and by_source(first, "imported") == {"claude-code": 4} and by_source(first, "waiting") == {
        "claude-code": 1}, err
    # The benchmark turn was cut mid-way (its tool call had no result yet); it finishes now.
    path = next((tmp_path / ".claude" / "projects").rglob("1111*.jsonl"))
    common = {"type": "user", "sessionId": "11111111-aaaa-4aaa-8aaa-000000000001", "cwd": "x", "isSidechain": False}
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({**common, "uuid": "c1-u7", "timestamp": "2026-11-20T10:10:30.000Z", "message": {
            "role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_3",
                                         "content": "p95 18 ms at 400 rps"}]}}) + "\n")
        handle.write(json.dumps({**common, "type": "assistant", "uuid": "c1-a7", "timestamp": "2026-11-20T10:10:40.000Z",
                                 "message": {"role": "assistant", "stop_reason": "end_turn", "content": [
                                     {"type": "text", "text": "The pool holds 400 rps at p95 18 ms."}]}}) + "\n")
    code, second, err = await run(env, "--file", str(path), "--source", "claude-code")
    assert code == 0 and by_source(second, "imported") == {"claude-code": 1}, err
    content = [r[4] for r in imported_rows(stack) if r[6].endswith(":c1-u6")]
    assert len(content) == 1
    assert "benchmark the pool" in content[0] and "make bench-pool" in content[0] and "p95 18 ms" in content[0]
    code, third, err = await run(env, "--file", str(path))
    assert code == 0 and by_source(third, "imported") == {"claude-code": 0}, err
    assert len(imported_rows(stack)) == 5


async def test_since_leaves_out_turns_that_ended_before_it(stack: EchoStack, tmp_path: Path) -> None:
    install(tmp_path, ("codex",))
    env = env_for(stack, tmp_path)
    code, reports, err = await run(env, "--since", "2026-11-19")
    assert code == 0, err
    assert by_source(reports, "imported") == {"codex": 2} and by_source(reports, "before_since") == {"codex": 1}


async def test_an_import_killed_mid_run_resumes_without_losing_or_repeating_a_turn(
    stack: EchoStack, tmp_path: Path
) -> None:
    from echo_memory.libs.testing.history_synth import write_history
    from tests.history.history_fixtures import make_repo

    turns = 300
    write_history(tmp_path, "codex", turns, 12, make_repo(tmp_path))
    env = env_for(stack, tmp_path)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "echo_memory.libs.local.cli", "import", "--source", "codex", env=env, cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    for _ in range(600):  # until at least one batch is stored, then kill it without warning
        await asyncio.sleep(0.1)
        if len(imported_rows(stack)) > 0:
            break
    proc.kill()  # SIGKILL: no cleanup, no flush
    await proc.wait()
    killed_at = len(imported_rows(stack))
    assert 0 < killed_at < turns, f"the kill should land mid-run, it landed at {killed_at}/{turns}"

    code, reports, err = await run(env, "--source", "codex")
    assert code == 0, err
    rows = imported_rows(stack)
    assert len(rows) == turns and len({r[6] for r in rows}) == turns
    # The killed run may have had one batch in flight: the writes service still stores it after the kill,
    # with no checkpoint recorded, so the resumed run reads those turns again and finds them `already` stored.
    read, imported, already = (by_source(reports, key)["codex"] for key in ("turns", "imported", "already"))
    assert imported + already == read, reports
    assert read >= turns - killed_at, "a checkpoint covered a turn that was not stored"
    assert turns - killed_at - BATCH_TURNS <= imported <= turns - killed_at, (killed_at, reports)


async def test_watch_imports_new_turns_as_they_finish_until_interrupted(stack: EchoStack, tmp_path: Path) -> None:
    import signal

    install(tmp_path, ("gemini-cli",))
    env = env_for(stack, tmp_path)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "echo_memory.libs.local.cli", "import", "--watch", "--interval", "1", "--quiet", env=env, cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        for _ in range(600):
            await asyncio.sleep(0.1)
            if len(imported_rows(stack)) == 3:
                break
        assert len(imported_rows(stack)) == 3
        session = next((tmp_path / ".gemini").rglob("session-2026-11-20*.jsonl"))
        with session.open("a", encoding="utf-8") as handle:  # the waiting turn's tool finishes, then it answers
            handle.write(json.dumps({"id": "g-m4", "type": "gemini", "content": "", "timestamp": "2026-11-20T12:03:02Z",
                                     "toolCalls": [{"id": "tc-2", "name": "glob", "status": "success",
                                                    "resultDisplay": "deploy/run.sh"}]}) + "\n")
            handle.write(json.dumps({"id": "g-m5", "type": "gemini", "timestamp": "2026-11-20T12:03:09Z",
                                     "content": "Build, push the image, then run deploy/run.sh."}) + "\n")
        for _ in range(600):
            await asyncio.sleep(0.1)
            if len(imported_rows(stack)) == 4:
                break
        contents = [r[4] for r in imported_rows(stack)]
        assert len(contents) == 4 and any("deploy/run.sh" in c and "Summarise the deploy" in c for c in contents)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 130, err.decode()
