"""`echo-memory benchmark` as a user runs it: a real process that starts its own throw-away system.

Behaviour, not speed: a tiny run (20 and 40 facts, a few requests) must print a complete report
with a positive, finite figure in every cell, and a bad --sizes must be refused before anything
starts. The report holds figures only; docs/BENCHMARKS.md compares them with the project's targets.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from echo_memory.libs.local.eval.benchmark import checkpoints, render

BIN = Path(sys.executable).parent / "echo-memory"


def _figures(stats: dict) -> list[float]:
    return [stats["p50"], stats["p95"]]


def test_tiny_benchmark_reports_every_figure_for_both_paths() -> None:
    run = subprocess.run(
        [str(BIN), "benchmark", "--sizes", "20,40", "--queries", "4", "--writes", "2", "--warm-queries", "3", "--json"],
        capture_output=True, text=True, timeout=180,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["error_count"] == 0, report["errors"]
    assert [r["size"] for r in report["rows"]] == [20, 40]
    for row in report["rows"]:
        assert row["facts"] >= row["size"]  # probes written at a smaller size stay in the store
        assert row["load_path"].startswith("write_episode")
        assert row["consolidate_s"] > 0  # the brief reads digests of this size's store
        for op, n in (("query", 4), ("digest", 5), ("brief", 5), ("write", 2)):
            for path in ("edge", "bus"):
                stats = row[op][path]
                assert stats["n"] == n, (op, path, stats)
                assert all(math.isfinite(v) and v > 0 for v in _figures(stats)), (op, path, stats)
                assert stats["p95"] >= stats["p50"]
    ratio = report["ratio"]
    assert (ratio["from"], ratio["to"]) == (20, 40)
    assert ratio["edge"] > 0 and ratio["bus"] > 0
    noise = report["noise_floor"]
    assert noise["size"] == 20 and set(noise["spread_p50_pct"]) == {"edge", "bus"}
    assert set(report["channel_costs"]) == {"dense", "dense+lexical", "dense+graph"}
    table = render(report)
    # Figures only: the project's own latency targets are no verdict on a user's machine.
    assert "bars" not in report and not any(word in table for word in ("≤", "MISSED", " met", "bar "))
    assert "query edge p50/p95" in table and "brief bus p50/p95" in table and "noise floor (20 facts" in table
    assert "ratio 40/20 facts" in table
    assert report["warm_queries"] == 3 and "3 uncounted warm-up queries" in table


def test_bad_sizes_are_refused_before_anything_starts() -> None:
    run = subprocess.run([str(BIN), "benchmark", "--sizes", "0,abc"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "--sizes" in run.stderr
    run = subprocess.run([str(BIN), "benchmark", "--warm-queries", "-1"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "--warm-queries" in run.stderr


def test_one_thousand_is_measured_whenever_a_larger_size_is_asked_for() -> None:
    # The bar compares 100k with 1k, so 1k is always a checkpoint when the run goes past it.
    assert checkpoints([250, 10_000, 100_000]) == [250, 1_000, 10_000, 100_000]
    assert checkpoints([20, 40]) == [20, 40]
