"""`python -m lab`: a missing dataset or a bad argument is one line and exit code 2, before anything starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lab.__main__ import main

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["sweep"], "no dataset at {dir}/agent-facts/agent-facts.json (set ECHO_DATASETS_DIR"),
        (["sweep", "--dataset", "{dir}/mine.json"], "no dataset at {dir}/mine.json"),
        (["mixed", "1", "--dataset", "{dir}"], "no dataset at {dir}/locomo/locomo10.json"),
        (["fusion-grid", "reply=0.5"], "no dataset at {dir}/locomo/locomo10.json"),
        (["ablate", "--locomo", "1", "--dataset", "{dir}"], "no dataset at {dir}/locomo/locomo10.json"),
        (["fusion-grid", "reply=high", "--locomo-path", "{dir}"], "'high' of reply is not a list of numbers"),
        (["sweep", "--dataset", "{dir}", "--sizes", "ten"], "--sizes takes positive integers"),
        (["mixed", "0", "--dataset", "{dir}", "--locomo-path", "{dir}"], "1 or more"),
        (["chat-shape"], "no dataset at {dir}/locomo/locomo10.json"),
        (["chat-shape", "neighbour=x", "--locomo-path", "{dir}"], "'x' of neighbour is not a list of numbers"),
    ],
)
def test_refused_with_one_line(
    argv: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ECHO_DATASETS_DIR", str(tmp_path))
    assert main([part.replace("{dir}", str(tmp_path)) for part in argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and said.replace("{dir}", str(tmp_path)) in captured.err


def test_runs_as_a_module_from_the_repository(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "ECHO_DATASETS_DIR": str(tmp_path / "none")}
    run = subprocess.run([sys.executable, "-m", "lab", "sweep"], cwd=REPOSITORY, env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("python -m lab sweep: no dataset at") and "Traceback" not in run.stderr
