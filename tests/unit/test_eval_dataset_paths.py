"""`echo-memory eval` / `eval-external` read datasets only from the path they are given.

No dataset ships with the product and none is looked for outside the installed tree: without a
path the command says which argument is missing; a folder is looked into for the expected file;
anything else is refused with a one-line reason and exit code 2, before any connection is made.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from echo_memory.libs.local.cli.main import main
from echo_memory.libs.local.cli.retrieval_commands import _dataset_file


def test_a_folder_resolves_to_the_expected_file(tmp_path: Path) -> None:
    (tmp_path / "agent-facts.json").write_text("{}")
    assert _dataset_file("eval", str(tmp_path), "agent-facts.json") == tmp_path / "agent-facts.json"
    assert _dataset_file("eval", str(tmp_path / "agent-facts.json"), "agent-facts.json") == tmp_path / "agent-facts.json"


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "--dataset", "{dir}"],
        ["eval-external", "locomo", "{dir}/nothing.json"],
        ["eval-external", "madial", "{dir}"],
        ["eval-external", "longmemeval", "{dir}"],
    ],
)
def test_a_missing_dataset_is_refused_with_a_reason(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([part.replace("{dir}", str(tmp_path)) for part in argv])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path) in err
    assert "no dataset file at" in err or "not found in" in err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["eval-external", "locomo"], "echo-memory eval-external locomo PATH"),
        (["eval-external", "madial", "--questions", "5"], "echo-memory eval-external madial PATH"),
        (["eval-external", "longmemeval", "--per-type", "2"], "echo-memory eval-external longmemeval PATH"),
    ],
)
def test_no_dataset_path_names_the_missing_argument(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No system is running for this data directory: a refusal must come before any connection.
    monkeypatch.setenv("ECHO_MEMORY_HOME", str(tmp_path))
    code = main(argv)
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err and "Traceback" not in err


def test_eval_without_a_dataset_reads_the_own_store_and_says_when_it_is_not_running(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No dataset means the user's own store: with no system for this data directory, one line, exit 1.
    monkeypatch.setenv("ECHO_MEMORY_HOME", str(tmp_path))
    monkeypatch.delenv("ECHO_MEMORY_NATS_URL", raising=False)
    assert main(["eval"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("echo-memory eval: ") and "Traceback" not in err
    assert main(["eval", "--dataset", str(tmp_path), "--ablate"]) == 2
    assert "--ablate runs on your own store" in capsys.readouterr().err


def test_the_research_flags_are_not_product_commands(capsys: pytest.CaptureFixture[str]) -> None:
    # The fusion grid and the sweep/ablation/mixed experiments live in lab/ (`python -m lab`).
    for argv in (["eval", "--mixed", "1"], ["eval-external", "locomo", "x.json", "--fusion-grid", "reply=0.5"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        assert "unrecognized arguments" in capsys.readouterr().err


def test_a_bad_madial_query_mode_is_refused_before_connecting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("MADial-Bench-en-memory.json", "MADial-Bench-en-dialogue.json"):
        (tmp_path / name).write_text("")
    assert main(["eval-external", "madial", str(tmp_path), "--query-mode", "first-line"]) == 2
    assert "--query-mode must be one of context, last-user, recent-first" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--sweep"], "--sweep draws the --context curve"),
        (["--context", "--sweep", "--sweep-sizes", "10,ten"], "--sweep-sizes takes positive integers"),
        (["--context", "--sweep", "--sweep-sizes", "0"], "--sweep-sizes takes positive integers"),
    ],
)
def test_bad_sweep_flags_are_refused_before_anything_starts(
    argv: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # eval runs in a throw-away system of its own (tests/bench/test_eval_leaves_no_trace.py); a
    # refusal comes before that system starts.
    (tmp_path / "agent-facts.json").write_text('{"facts": [{"id": "f1", "text": "We use Postgres."}], "queries": []}')
    monkeypatch.setenv("ECHO_MEMORY_HOME", str(tmp_path / "home"))
    assert main(["eval", "--dataset", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err
    assert not (tmp_path / "home").exists()
