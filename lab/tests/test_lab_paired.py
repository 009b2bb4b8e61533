"""`python -m lab paired`: two reports' questions compared pair by pair, or one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.__main__ import main


def _report(path: Path, recalls: list[float], dataset: str = "locomo") -> Path:
    rows = [{"system": {"recall": r, "hit": float(r > 0)}, "bm25": {"recall": 0.0, "hit": 0.0}} for r in recalls]
    path.write_text(json.dumps({"dataset": dataset, "per_question": rows}))
    return path


def test_differences_are_paired_question_by_question(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _report(tmp_path / "a.json", [0.0, 0.5, 1.0, 1.0])
    other = _report(tmp_path / "b.json", [1.0, 0.5, 1.0, 0.5])
    assert main(["paired", str(base), str(other)]) == 0
    report = json.loads(capsys.readouterr().out)
    recall = report["metrics"]["recall"]
    assert (report["questions"], recall["base"], recall["other"]) == (4, 0.625, 0.75)
    assert (recall["mean"], recall["up"], recall["down"]) == (0.125, 1, 1)
    assert recall["ci95"][0] <= 0.125 <= recall["ci95"][1]
    assert report["metrics"]["hit"]["mean"] == 0.25


@pytest.mark.parametrize(
    ("other", "said"),
    [([1.0], "are not the same questions"), (None, "no per_question scores"), ("missing", "No such file")],
)
def test_reports_that_do_not_pair_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], other: object, said: str
) -> None:
    base = _report(tmp_path / "a.json", [0.0, 1.0])
    if other is None:
        (tmp_path / "b.json").write_text(json.dumps({"dataset": "locomo", "overall": {}}))
    elif isinstance(other, list):
        _report(tmp_path / "b.json", other)
    path = tmp_path / ("b.json" if other != "missing" else "nowhere.json")
    assert main(["paired", str(base), str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and said in captured.err
