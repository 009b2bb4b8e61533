"""`python -m lab paired BASE.json OTHER.json`: two `eval-external … --json` reports, question by question.

Both reports must come from the same harness on the same questions in the same order (the
`per_question` list `--json` adds). For every metric the system's rows carry, prints the mean of
OTHER − BASE over the questions with its 95% paired bootstrap interval, and how many questions
went up and down. A difference whose interval holds 0 is not shown to be one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from echo_memory.libs.local.eval.bm25 import lead


def _rows(path: Path) -> tuple[str, list[dict[str, float]]]:
    report = json.loads(path.read_text(encoding="utf-8"))
    if "per_question" not in report:
        raise ValueError(f"{path} has no per_question scores: run eval-external with --json")
    return str(report.get("dataset", "?")), [row["system"] for row in report["per_question"]]


def compare(base: Path, other: Path) -> dict[str, Any]:
    """{"dataset", "questions", "metrics": {name: {"base", "other", "mean", "ci95", "up", "down"}}}.

    Raises ValueError when the reports are of different datasets or lengths, or lack per-question rows.
    """
    base_set, before = _rows(base)
    other_set, after = _rows(other)
    if base_set != other_set or len(before) != len(after):
        raise ValueError(f"{base} ({base_set}, {len(before)} questions) and {other} ({other_set}, "
                         f"{len(after)} questions) are not the same questions")
    metrics: dict[str, Any] = {}
    # A metric one report lacks (added to the harness after the other was run) is not compared.
    shared = [k for k, v in before[0].items() if isinstance(v, float) and k in after[0]] if before else []
    for name in shared:
        old = [row[name] for row in before]
        new = [row[name] for row in after]
        paired = lead(new, old)
        metrics[name] = {"base": round(sum(old) / len(old), 4), "other": round(sum(new) / len(new), 4), **paired,
                         "up": sum(b > a for a, b in zip(old, new, strict=True)),
                         "down": sum(b < a for a, b in zip(old, new, strict=True))}
    return {"dataset": base_set, "questions": len(before), "metrics": metrics}
