"""Running `echo-memory import --from` as a real process against the test stack, and counting what it stored."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import psycopg

from echo_memory.libs.testing import EchoStack

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def env_for(stack: EchoStack, home: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("ECHO_MEMORY_", "XDG_"))}
    return {**keep, "HOME": str(home), "ECHO_MEMORY_HOME": str(home / "echo"), "ECHO_MEMORY_NATS_URL": stack.nats_url,
            "ECHO_MEMORY_ORG": stack.org}


async def cli(env: dict[str, str], *args: str, timeout: float = 280,
              report: bool = True) -> tuple[int, dict[str, Any] | None, str]:
    """(exit code, the --json report or None, stderr) of one `echo-memory <args> [--json]` process."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "echo_memory.libs.local.cli", *args, *(["--json"] if report else []), env=env, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=timeout)
    report = json.loads(out) if out.strip() else None
    return proc.returncode or 0, report, err.decode()


def facts_by(stack: EchoStack, tool: str) -> list[dict[str, Any]]:
    """Every fact version the tool wrote: source and target names and types, relation, text, validity."""
    with psycopg.connect(stack.database_url) as conn:
        rows = conn.execute(
            "SELECT s.name, s.type, t.name, t.type, f.relation, f.text, f.t_invalid IS NULL, f.supersedes, f.agent_id,"
            " f.session_id FROM facts f JOIN entities s ON s.id = f.source_entity JOIN entities t ON t.id = "
            "f.target_entity WHERE f.tool = %s ORDER BY f.written_at, f.id", (tool,)).fetchall()
    keys = ("source", "source_type", "target", "target_type", "relation", "text", "current", "supersedes", "agent",
            "session")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def audit_kinds(stack: EchoStack, tool: str) -> dict[str, int]:
    with psycopg.connect(stack.database_url) as conn:
        rows = conn.execute("SELECT kind, count(*) FROM audit_log WHERE tool = %s GROUP BY kind", (tool,)).fetchall()
    return {str(k): int(n) for k, n in rows}


def accounted(report: dict[str, Any]) -> None:
    """Every record has exactly one outcome, and every one not stored has a reason."""
    assert sum(report["outcomes"].values()) == report["records"], report["outcomes"]
    assert sum(report["kinds"].values()) == report["records"]
    o = report["outcomes"]
    not_stored = report["records"] - o["stored"] - o["superseded"] - o["ended"]
    assert len(report["reasons"]) == not_stored
    assert all(r["reason"] and r["where"] for r in report["reasons"])
