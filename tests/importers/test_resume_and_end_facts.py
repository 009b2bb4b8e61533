"""An import killed mid-way resumes without storing anything twice; end_facts ends, never erases."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
from pathlib import Path

import psycopg
import pytest

from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.local.importers.state import from_state_path
from echo_memory.libs.testing import EchoStack
from tests.importers.support import ROOT, accounted, cli, env_for, facts_by

TOOL = "echo-memory import --from mcp-memory"


def write_graph(path: Path, entities: int) -> int:
    """A graph of `entities` entities with four observations each and one relation each; its record count."""
    with path.open("w") as out:
        for e in range(entities):
            out.write(json.dumps({"type": "entity", "name": f"Unit {e:04d}", "entityType": "service",
                                  "observations": [f"handles queue {e}-{k}" for k in range(4)]}) + "\n")
        for e in range(entities):
            out.write(json.dumps({"type": "relation", "from": f"Unit {e:04d}", "to": f"Unit {(e + 1) % entities:04d}",
                                  "relationType": "feeds"}) + "\n")
    return entities * 6


def acknowledged(home: Path) -> int:
    path = from_state_path(home / "echo")
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path) as conn:
            return int(conn.execute("SELECT count(*) FROM done_record").fetchone()[0])
    except sqlite3.OperationalError:  # created, its table not yet
        return 0


async def test_a_killed_import_resumes_and_stores_every_record_once(stack: EchoStack, tmp_path: Path) -> None:
    env = env_for(stack, tmp_path)
    graph = tmp_path / "memory.jsonl"
    total = write_graph(graph, 60)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "echo_memory.libs.local.cli", "import", "--from", "mcp-memory", str(graph), "--quiet",
        env=env, cwd=ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    for _ in range(1200):  # kill it once some batches, not all, are acknowledged
        await asyncio.sleep(0.05)
        if acknowledged(tmp_path) >= 60:
            break
    os.kill(proc.pid, signal.SIGKILL)
    await proc.wait()
    done = acknowledged(tmp_path)
    assert 0 < done < total, f"the kill came at {done} of {total}"

    code, report, err = await cli(env, "import", "--from", "mcp-memory", str(graph))
    assert code == 0, err
    assert report is not None
    accounted(report)
    assert report["earlier_run"] == done and report["outcomes"]["unchanged"] >= done
    facts = facts_by(stack, TOOL)
    assert len(facts) == total, "every record stored, none twice"
    assert len({(f["source"], f["relation"], f["target"]) for f in facts}) == total
    assert all(f["current"] for f in facts)


async def test_end_facts_ends_the_current_version_and_answers_not_current_after(stack: EchoStack) -> None:
    await stack.admin_call("writes", "write_episode", {
        "session_id": "s-1", "entities": [{"name": "Ada", "type": "person"}],
        "facts": [{"source": "Ada", "target": "Ada", "relation": "memory m-1", "fact": "Ada: likes tea",
                   "confidence": "extracted"}]})
    ended = await stack.admin_call("writes", "end_facts", {"session_id": "s-1", "facts": [
        {"source": "ada", "target": "ADA", "relation": "memory m-1", "reason": "deleted at the source"},
        {"source": "Ada", "target": "Ada", "relation": "memory m-2", "reason": "never stored"}]})
    assert [r["outcome"] for r in ended["results"]] == ["ended", "not_current"]
    again = await stack.admin_call("writes", "end_facts", {"session_id": "s-1", "facts": [
        {"source": "Ada", "target": "Ada", "relation": "memory m-1", "reason": "deleted at the source"}]})
    assert [r["outcome"] for r in again["results"]] == ["not_current"]
    with psycopg.connect(stack.database_url) as conn:
        rows = conn.execute("SELECT text, t_invalid IS NOT NULL FROM facts WHERE relation = 'memory m-1'").fetchall()
        audit = conn.execute("SELECT reason, before->>'text' FROM audit_log WHERE kind = 'fact_ended'").fetchall()
    assert rows == [("Ada: likes tea", True)], "ended, not erased"
    assert audit == [("deleted at the source", "Ada: likes tea")]

    with pytest.raises(EchoError) as caught:
        await stack.admin_call("writes", "end_facts", {"session_id": "s-1", "facts": [
            {"source": "Ada", "target": "Ada", "relation": "x", "reason": "key AKIAQWERTYUIOPASDFGH"}]})
    assert caught.value.code == "invalid_argument" and "AKIA" not in caught.value.message
