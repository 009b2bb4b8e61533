"""Running the model commands in the test process against the real stack and a local stand-in model."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from echo_memory.libs.local.cli import model_commands
from echo_memory.libs.local.cli.main import build_parser
from echo_memory.libs.testing import EchoStack
from tests.llm.openai_stand_in import StandIn, llm_env


async def run_command(stack: EchoStack, stand_in: StandIn | None, capsys: pytest.CaptureFixture[str],
                      monkeypatch: pytest.MonkeyPatch, *argv: str, as_json: bool = True) -> tuple[int, Any]:
    """Run `echo-memory <argv> --json` in-process; (exit code, the printed JSON report, or the text without --json)."""
    if stand_in is not None:
        for key, value in llm_env(stand_in).items():
            monkeypatch.setenv(key, value)
    args = build_parser().parse_args([*argv, *(["--json"] if as_json else [])])
    capsys.readouterr()
    code = await model_commands.command(stack.settings, args)
    out = capsys.readouterr().out
    if not as_json:
        return code, out
    return code, json.loads(out) if out.strip() else None


def rows(stack: EchoStack, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(stack.database_url) as conn:
        return conn.execute(query, params).fetchall()  # type: ignore[arg-type]


def counts(stack: EchoStack) -> dict[str, int]:
    """Rows of every table a command could change."""
    tables = ("facts", "entities", "entity_aliases", "episodes", "audit_log", "outbox", "episode_distillations",
              "idempotency")
    with psycopg.connect(stack.database_url) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}  # type: ignore[index]


def current_facts(stack: EchoStack) -> set[tuple[str, str]]:
    """(agent, text) of every current fact version."""
    return {(a, t) for a, t in rows(stack, "SELECT agent_id, text FROM facts WHERE t_invalid IS NULL")}
