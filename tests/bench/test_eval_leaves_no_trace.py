"""`echo-memory eval` as a user runs it beside their own running store: it must leave no trace there.

The run scores in a throw-away system of its own (libs/local/eval/system.py); the user's store, a real
running stack here, holds the same rows in every table afterwards. Without --json the report is a
table; `--context --sweep` prints the token curve, one line per store size.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import psycopg

from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import Writer, fact

REPO = Path(__file__).resolve().parents[2]
FACTS = [f"Database backups of cluster {name} run nightly and are kept for {days} days."
         for name, days in zip("ABCDEFGHIJKL", range(3, 15), strict=True)] + ["The office cat is named Miso."]


def _dataset(tmp_path: Path) -> Path:
    facts = [{"id": f"f{i:02d}", "text": text} for i, text in enumerate(FACTS, start=1)]
    queries = [
        {"id": "cat", "text": "what is the office cat called", "relevant": ["f13"], "kind": "lexical"},
        {"id": "a", "text": "how long are backups of cluster A kept", "relevant": ["f01"], "kind": "paraphrase"},
        {"id": "b", "text": "cluster B backup retention", "relevant": ["f02"], "kind": "lexical"},
    ]
    path = tmp_path / "agent-facts.json"
    path.write_text(json.dumps({"facts": facts, "queries": queries}))
    return path


async def _snapshot(url: str) -> dict[str, object]:
    """Rows of every table of the store, and the scope names."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in await (await conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")).fetchall()]
        out: dict[str, object] = {}
        for table in tables:
            out[table] = (await (await conn.execute(f'SELECT count(*) FROM "{table}"')).fetchone())[0]  # type: ignore[index]
        out["scope names"] = [r[0] for r in await (await conn.execute("SELECT name FROM scopes ORDER BY name")).fetchall()]
        return out


async def _cli(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "echo_memory.libs.local.cli", *args, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_eval_and_its_sweep_leave_the_running_store_unchanged(stack: EchoStack, tmp_path: Path) -> None:
    async with stack.client(stack.issue_token("claude-code")) as c:
        await Writer(c).write([("API", "service"), ("Redis", "cache")],
                              [fact("API", "Redis", "caches in", "The API caches sessions in Redis.")])
    before = await _snapshot(stack.database_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")}
    env |= {"ECHO_MEMORY_HOME": str(tmp_path / "home"), "ECHO_MEMORY_NATS_URL": stack.nats_url,
            "ECHO_MEMORY_ORG": stack.org, "ECHO_MEMORY_DATABASE_URL": stack.database_url,
            "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "operator"), env.get("PYTHONPATH", "")])}
    dataset = str(_dataset(tmp_path))

    code, out, err = await _cli(["eval", "--dataset", dataset, "--context"], env)
    assert code == 0, err[-2000:]
    lines = out.splitlines()
    assert lines[0] == "agent-facts: 3 queries, ranking depth 100"
    assert lines[2].split() == ["hit1", "hit10", "mrr", "mrr10", "n"]
    overall = lines[3].split()
    assert overall[0] == "overall" and overall[-1] == "3" and 0 <= float(overall[2]) <= 1
    assert any(line.startswith("context: ") and "tokens per top-10 recall" in line for line in lines)
    assert await _snapshot(stack.database_url) == before

    code, out, err = await _cli(["eval", "--dataset", dataset, "--context", "--sweep", "--sweep-sizes", "5,13"], env)
    assert code == 0, err[-2000:]
    rows = [line.split() for line in out.splitlines()[3:]]
    assert [r[:2] for r in rows] == [["5", "2"], ["13", "3"]]  # facts, queries whose facts are all stored
    small, full = (float(r[2]) for r in rows)
    dump_small, dump_full = (int(r[3]) for r in rows)
    assert dump_small < dump_full
    assert small == dump_small  # a top-10 recall of a 5-fact store returns all of it: nothing saved
    assert full < dump_full and rows[0][4] == "0.0%" and float(rows[1][4].rstrip("%")) > 0
    assert await _snapshot(stack.database_url) == before

    code, _, err = await _cli(["eval", "--dataset", dataset, "--sweep"], env)
    assert code == 2 and "--sweep draws the --context curve" in err
