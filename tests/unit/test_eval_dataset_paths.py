"""`echo-memory eval` / `eval-external locomo` take a dataset file or the folder holding it.

A folder is looked into for the expected file; anything else is refused with a one-line reason
and exit code 2, before any connection is made (it used to end in an IsADirectoryError trace).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from libs.cli.main import main
from libs.cli.retrieval_commands import _dataset_file


def test_a_folder_resolves_to_the_expected_file(tmp_path: Path) -> None:
    (tmp_path / "agent-facts.json").write_text("{}")
    assert _dataset_file("eval", str(tmp_path), "agent-facts.json") == tmp_path / "agent-facts.json"
    assert _dataset_file("eval", str(tmp_path / "agent-facts.json"), "agent-facts.json") == tmp_path / "agent-facts.json"


@pytest.mark.parametrize("argv", [["eval", "--dataset", "{dir}"], ["eval-external", "locomo", "{dir}/nothing.json"]])
def test_a_missing_dataset_is_refused_with_a_reason(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([part.replace("{dir}", str(tmp_path)) for part in argv])
    assert code == 2
    err = capsys.readouterr().err
    assert "no dataset file at" in err and str(tmp_path) in err
