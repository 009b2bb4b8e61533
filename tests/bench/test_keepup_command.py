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
    run = subprocess.run([str(BIN), "benchmark-keepup", "--facts", "150", "--seconds", "2", "--quiet-seconds", "2",
                          "--writers", "1", "--hot-copy-seconds", "0.25", "--json"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["facts"] == 150 and report["first_run"]["placed"] > 0 and report["hot_copy_seconds"] == 0.25
    assert [p["phase"] for p in report["phases"]] == ["quiet", "alone", "runs", "alone", "runs"]
    for phase in report["phases"]:  # each search's steps were timed in the retrieval service
        searched = phase["search_ms"]["read_exactly"]["n"] + phase["search_ms"]["filtered"]["n"]
        assert searched > 0 and phase["search_steps_ms"]["request"]["n"] == searched
        assert 0 < phase["search_steps_ms"]["embed_query"]["p50"] <= phase["search_steps_ms"]["request"]["p95"]
    quiet, *phases = report["phases"]
    # The first run placed the whole store: with nobody writing, nothing waits and nothing is copied.
    assert quiet["writes"] == 0 and quiet["runs"]["n"] == 0 and quiet["pending"] == {"max": 0, "end": 0}
    assert quiet["hot_copied"] == 0 and quiet["search_ms"]["filtered"]["n"] == 0
    for phase in phases:
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
    assert [ratio["p50"] > 0 for ratio in report["summary"]["search_vs_quiet"]] == [True] * 4
    # So what waits after the first phase of writes, and what was copied in it, are of what it wrote
    # (one fact may be copied between the two counts and be in both).
    first = phases[0]
    assert first["pending"]["end"] <= first["facts"] and first["hot_copied"] <= first["facts"]


def test_the_split_of_searches_is_the_retrievals() -> None:
    assert keepup.PENDING_EXACT == queries.HOT_PENDING_EXACT


def test_benchmark_keepup_refuses_a_bad_count() -> None:
    for args in (["--writers", "0"], ["--seconds", "0"], ["--quiet-seconds", "0"], ["--facts", "-1"],
                 ["--hot-copy-seconds", "-1"]):
        run = subprocess.run([str(BIN), "benchmark-keepup", *args], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and "benchmark-keepup" in run.stderr, args
