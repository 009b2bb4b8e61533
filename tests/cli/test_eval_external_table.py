"""`eval-external` prints tables by default and the whole report with --json."""

from __future__ import annotations

import asyncio
import json
import random
import re
from pathlib import Path

import pytest

from echo_memory.libs.local.cli.main import main
from echo_memory.libs.local.eval.bm25 import lead
from echo_memory.libs.local.eval.metrics import summarise
from echo_memory.libs.local.eval.report import render_external

FIXTURE = Path(__file__).parents[1] / "bench" / "fixtures" / "longmemeval_tiny.json"
TYPES = ["knowledge-update", "multi-session", "single-session-assistant", "single-session-user", "temporal-reasoning"]


def _row(table: str, label: str) -> list[str]:
    line = next(line for line in table.splitlines() if re.match(rf"{re.escape(label)}\s{{2,}}\S", line))
    return line[len(label):].split()


def test_each_figure_lands_in_its_own_column_and_row() -> None:
    rng = random.Random(7)
    rows = [{"category": c, "recall": rng.random(), "mrr": rng.random(), "tokens": 100 + 400 * rng.random()}
            for c in ("multi-hop", "single-hop") for _ in range(15)]
    baseline = [dict(r, recall=r["recall"] / 3) for r in rows]
    overall, base = summarise(rows), summarise(baseline)
    groups = {c: summarise([r for r in rows if r["category"] == c], ci=False) for c in ("multi-hop", "single-hop")}
    report = {"dataset": "locomo", "k": 10, "questions": len(rows), "overall": overall, "by_category": groups,
              "bm25": {"overall": base}, "lead_over_bm25": {"recall": lead([r["recall"] for r in rows],
                                                                          [r["recall"] for r in baseline])},
              "latency_ms": {"p50": 4.5, "p95": 9.25, "n": len(rows)}, "per_question": [{"system": {}, "bm25": {}}]}
    table = render_external(report)
    header = table.splitlines()[2].split()
    assert header == ["recall", "mrr", "tokens", "n"]
    assert _row(table, "overall") == [f"{overall['recall']:.4f}", f"{overall['mrr']:.4f}", f"{overall['tokens']:.1f}",
                                      str(len(rows))]
    assert _row(table, "single-hop")[0] == f"{groups['single-hop']['recall']:.4f}"
    assert _row(table, "bm25 overall")[0] == f"{base['recall']:.4f}"
    low, high = overall["recall_ci95"]
    assert f"{low:.2f}..{high:.2f}" in table
    assert f"+{report['lead_over_bm25']['recall']['mean']:.4f}" in table
    assert "p50 4.5 ms, p95 9.25 ms" in table
    assert "per_question" not in table and "{" not in table


async def test_the_command_prints_tables_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    # A throw-away system of its own (Postgres, NATS, services), as a user's run gets.
    code = await asyncio.to_thread(main, ["eval-external", "longmemeval", str(FIXTURE), "--per-type", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)
    assert out.startswith("longmemeval: questions 5,")
    assert _row(out, "overall")[-1] == "5"
    for kind in TYPES:
        assert _row(out, kind)[-1] == "1", out
    assert "recall@5" in out and "95% CI" in out and "--json" in out
