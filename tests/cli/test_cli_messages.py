"""Messages that must not mislead, shown without a running system (the CLI's own code paths)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from echo_memory.libs.local.cli.main import USAGE_ERROR, build_parser, main
from echo_memory.libs.local.supervisor.ports import free_port


@pytest.fixture
def nothing_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("ECHO_MEMORY_DATABASE_URL", "ECHO_MEMORY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ECHO_MEMORY_HOME", str(tmp_path))
    monkeypatch.setenv("ECHO_MEMORY_NATS_URL", f"nats://127.0.0.1:{free_port()}")
    return tmp_path


def options_of(command: str) -> set[str]:
    sub = next(a for a in build_parser(command)._actions if isinstance(a, argparse._SubParsersAction))
    return {o for action in sub.choices[command]._actions for o in action.option_strings}


@pytest.mark.parametrize("question", ["", "   "])
def test_an_empty_recall_names_only_flags_recall_has(
    question: str, nothing_running: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["recall", question]) == USAGE_ERROR
    err = capsys.readouterr().err
    assert err.startswith("echo-memory recall: ") and "digest" not in err
    named = set(re.findall(r"--[a-z][a-z-]*", err))
    assert named and named <= options_of("recall"), err
