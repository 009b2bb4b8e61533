"""`echo-memory benchmark-keepup` end to end on a small store: writes alone and beside consolidation
runs, over the real bus and Postgres; the figures are printed, not judged, but each must be there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from echo_memory.libs.local.eval import keepup
from echo_memory.services.retrieval import queries

BIN = Path(sys.executable).parent / "echo-memory"


def test_benchmark_keepup_reports_writes_alone_and_beside_runs() -> None:
    run = subprocess.run([str(BIN), "benchmark-keepup", "--facts", "150", "--seconds", "2", "--writers", "1",
                          "--hot-copy-seconds", "0.25", "--json"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["facts"] == 150 and report["first_run"]["placed"] > 0 and report["hot_copy_seconds"] == 0.25
    assert [p["phase"] for p in report["phases"]] == ["alone", "runs", "alone", "runs"]
    for phase in report["phases"]:
        assert phase["writes"] > 0 and phase["facts"] >= phase["writes"]  # every write stored its facts
        assert 0 < phase["write_ms"]["p50"] <= phase["write_ms"]["p95"] <= phase["write_ms"]["max"]
        assert phase["lock_samples"] > 0 and phase["loop_late_ms"]["max"] >= phase["loop_late_ms"]["p99"] >= 0
        assert 0 <= phase["samples_blocked_by_a_run"] <= phase["lock_wait_samples"] <= phase["lock_samples"]
        ran = phase["runs"]["n"]
        assert (ran > 0) if phase["phase"] == "runs" else (ran == 0)
        assert len(phase["runs"]["placed"]) == ran
        if ran:  # the phase before wrote facts no run had placed: the first run of this one places them
            assert phase["runs"]["placed"][0] > 0
        else:  # each fact written waits for a run or was copied between runs
            assert phase["pending"]["end"] + phase["hot_copied"] >= phase["facts"] and phase["hot_copied"] > 0
        searches = phase["search_ms"]
        assert searches["read_exactly"]["n"] + searches["filtered"]["n"] > 0
        if phase["pending"]["max"] <= keepup.PENDING_EXACT:  # counted before each search
            assert searches["filtered"]["n"] == 0 and searches["read_exactly"]["p50"] > 0
    assert len(report["summary"]["facts_per_s_ratio"]) == 2
    # The first run placed the whole store, so what waits after the first phase, and what was copied
    # in it, are of what it wrote (one fact may be copied between the two counts and be in both).
    first = report["phases"][0]
    assert first["pending"]["end"] <= first["facts"] and first["hot_copied"] <= first["facts"]


def test_the_split_of_searches_is_the_retrievals() -> None:
    assert keepup.PENDING_EXACT == queries.HOT_PENDING_EXACT


def test_benchmark_keepup_refuses_a_bad_count() -> None:
    for args in (["--writers", "0"], ["--seconds", "0"], ["--facts", "-1"], ["--hot-copy-seconds", "-1"]):
        run = subprocess.run([str(BIN), "benchmark-keepup", *args], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and "benchmark-keepup" in run.stderr, args
