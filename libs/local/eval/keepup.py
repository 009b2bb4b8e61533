"""`echo-memory benchmark-keepup`: writes at the pace the machine sustains, alone and beside
consolidation runs, in one throw-away system.

A store of `facts` facts (an organisation's history, loaded by COPY and consolidated once) is first
searched with nothing else running for `quiet_seconds` (the baseline of the searches), then takes
`writers` agents writing sessions back to back over the bus for `seconds`, in four phases: alone,
beside back-to-back consolidation runs of the same scope, alone, beside runs. All services run in
this process, on one event loop, as `echo-memory up` runs them on a laptop. Each phase reports:
- writes and facts stored per second, write latency p50/p95/max;
- how late a 10 ms timer on the services' event loop fired (p99, max): a run that held the loop
  would hold every write and query the process serves;
- samples of Postgres backends waiting on a lock (every 50 ms), with what the waiting and the
  blocking statements were, and in how many consolidation's (a run's or the copy's) was the blocker;
- a search (`query_memory`, the default hot search) every second, and before each how many facts
  waited in `hot_pending` (written since the last run and not yet copied; the most, and at the
  phase's end): its latency apart for when at most PENDING_EXACT waited (it reads them exactly) and
  when more did (it filters the facts table instead); the search's steps in the retrieval service
  (telemetry/steps.py; wall ms p50/p95, which overlap where steps run at once); and the facts the
  consolidation service copied into the hot tier's indexes between runs (every `hot_copy_seconds`;
  0 leaves it to runs);
- the runs that finished, their wall time, and the lag bound: the longest time from one run's start
  to the next run's end, within which any fact written during the phase was in a finished run;
- CPU seconds of this process (the services and the writers) and of the consolidation service's
  run processes (its children, one per run, where runs do their work). Not Postgres': autovacuum
  workers come and go with the writes, and a process that ended takes its CPU counters with it.
Figures only: nothing here is asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from echo_memory.libs.core.config.consolidation import ConsolidationSettings
from echo_memory.libs.local.eval import synthetic, tier_bench
from echo_memory.libs.local.eval.concurrency import run_process_cpu_seconds
from echo_memory.libs.local.eval.metrics import latency_stats, percentile
from echo_memory.libs.local.eval.runner import new_scope
from echo_memory.libs.local.eval.system import stack_call, throwaway_stack
from echo_memory.libs.local.eval.vector_cache import VectorCache
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.embed.minilm import MODEL_SHA256
from echo_memory.libs.server.telemetry import steps

QUIET = "quiet"
PHASES = ("alone", "runs", "alone", "runs")
SESSION_FACTS = 6  # facts per write: a session's worth, as an agent writes them
TICK_S = 0.01
LOCK_SAMPLE_S = 0.05
SEARCH_EVERY_S = 1.0
# The retrieval's HOT_PENDING_EXACT (libs may not import services; a test holds the two equal).
PENDING_EXACT = 2000
RUN_TIMEOUT_S = 3600

# Backends of this database waiting on a lock, with the statement each waits in and the statements
# of the backends blocking it.
LOCK_WAITS = """
SELECT left(w.query, 80), array_agg(left(b.query, 80) ORDER BY b.pid)
FROM pg_stat_activity w
CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS blocker(pid)
JOIN pg_stat_activity b ON b.pid = blocker.pid
WHERE w.datname = current_database() AND w.wait_event_type = 'Lock'
GROUP BY w.pid, w.query
"""
# What only consolidation's statements name, a run's or the copy's between runs: the tables they
# write (consolidation/queries.py). A blocker's text is the statement it runs or last ran in its
# transaction.
RUN_MARKERS = ("fact_tiers", "digests", "consolidation_runs", "tier_moves", "hot_facts", "hot_pending",
               "hot_edges")

PENDING = "SELECT count(*) FROM hot_pending p JOIN scopes s ON s.id = p.scope_id WHERE s.name = %(scope)s"
NAMES = "SELECT e.name FROM entities e JOIN scopes s ON s.id = e.scope_id WHERE s.name = %(scope)s"
COPIED = "hot_copied"  # the consolidation service's `echo_consolidation` outcome for facts copied between runs


@dataclass
class PhaseLog:
    write_ms: list[float] = field(default_factory=list)
    facts: int = 0
    late_ms: list[float] = field(default_factory=list)
    wait_samples: int = 0  # samples in which some backend waited on a lock
    blocked_by_a_run: int = 0  # samples in which a run's statement blocked another backend
    samples: int = 0
    waits: dict[str, int] = field(default_factory=dict)  # "waiting <- blocking" -> samples
    run_waits: dict[str, int] = field(default_factory=dict)  # the same, where a blocker named a run's table
    pending: list[int] = field(default_factory=list)  # facts in hot_pending, before each search
    search_ms: dict[str, list[float]] = field(default_factory=lambda: {"read_exactly": [], "filtered": []})
    runs: list[tuple[float, float]] = field(default_factory=list)  # (start, end), perf_counter seconds
    placed: list[int] = field(default_factory=list)  # per run: facts written since the previous run started


async def run(facts: int, seconds: float, writers: int, *, vector_cache: Path | None = None,
              hot_copy_seconds: float = ConsolidationSettings().hot_copy_seconds, quiet_seconds: float = 30.0,
              show: bool = False) -> dict[str, Any]:
    """The report: the store, then one entry for the quiet phase and one per phase of PHASES, and a
    side-by-side summary."""
    embedder = MiniLM()
    cache = None if vector_cache is None else VectorCache(vector_cache, f"{embedder.name}@{MODEL_SHA256}")
    policy = ConsolidationSettings(auto=False, hot_copy_seconds=hot_copy_seconds)
    async with throwaway_stack(embedder, consolidation=policy) as stack:
        call = stack_call(stack, timeout=RUN_TIMEOUT_S)
        registry = stack.running["consolidation"].ctx.metrics.registry

        def copied() -> int:
            return int(registry.get_sample_value("echo_consolidation_total", {"outcome": COPIED}) or 0)

        scope = await new_scope(call, "keepup")
        org = await tier_bench.load_org(stack.database_url, scope, facts, embedder, show, cache)
        first = await call("consolidation", "consolidate", {"scope": scope})
        async with await psycopg.AsyncConnection.connect(stack.database_url, autocommit=True) as conn:
            source = synthetic.FactSource(seed=11)
            # The history's names resolve by exact match; only names it lacks are declared new.
            source.known.update(r[0] for r in await (await conn.execute(NAMES, {"scope": scope})).fetchall())
            timings = steps.collect()
            phases = []
            try:
                for name, length in [(QUIET, quiet_seconds)] + [(name, seconds) for name in PHASES]:
                    begun = len(timings)
                    phases.append(await _phase(call, conn, scope, source, name, length, writers, copied))
                    phases[-1]["search_steps_ms"] = _search_steps(timings[begun:])
                    if show:
                        print(render_phase(phases[-1]), flush=True)
            finally:
                steps.stop()
    return {"facts": facts, "seconds": seconds, "quiet_seconds": quiet_seconds, "writers": writers,
            "hot_copy_seconds": hot_copy_seconds, "load": org["load"],
            "first_run": first["runs"][0]["counts"], "phases": phases, "summary": _summary(phases)}


async def _phase(call: Any, conn: psycopg.AsyncConnection, scope: str, source: synthetic.FactSource, name: str,
                 seconds: float, writers: int, copied: Callable[[], int]) -> dict[str, Any]:
    questions = synthetic.questions(50)
    copied_before = copied()
    log = PhaseLog()
    loop = asyncio.get_running_loop()
    stop = loop.time() + seconds
    done = asyncio.Event()
    cpu, run_cpu, started = time.process_time(), run_process_cpu_seconds(), time.perf_counter()

    async def writer(n: int) -> None:
        while loop.time() < stop:
            args = source.write_args(source.batch(SESSION_FACTS), scope, session=f"keepup-{name}-{n}")
            began = time.perf_counter()
            result = await call("writes", "write_episode", args)
            log.write_ms.append((time.perf_counter() - began) * 1000)
            if not result["stored"] or result["partial"]:
                raise RuntimeError(f"a keep-up write was not fully stored: {str(result)[:300]}")
            log.facts += len(result["edges_created"])

    async def runs() -> None:
        while loop.time() < stop:
            began = time.perf_counter()
            result = await call("consolidation", "consolidate", {"scope": scope})
            log.runs.append((began, time.perf_counter()))
            log.placed.append(result["runs"][0]["counts"]["placed"])

    async def ticker() -> None:
        while not done.is_set():
            began = loop.time()
            await asyncio.sleep(TICK_S)
            log.late_ms.append(max(0.0, (loop.time() - began - TICK_S) * 1000))

    async def locks() -> None:
        while not done.is_set():
            rows = await (await conn.execute(LOCK_WAITS)).fetchall()
            log.samples += 1
            if rows:
                log.wait_samples += 1
            by_a_run = False
            for waiting, blocking in rows:
                key = f"{waiting} <- {' | '.join(blocking)}"
                log.waits[key] = log.waits.get(key, 0) + 1
                if any(marker in text for text in blocking for marker in RUN_MARKERS):
                    log.run_waits[key] = log.run_waits.get(key, 0) + 1
                    by_a_run = True
            log.blocked_by_a_run += int(by_a_run)
            await asyncio.sleep(LOCK_SAMPLE_S)

    async def searcher() -> None:
        for question in itertools.cycle(questions):
            if done.is_set():
                return
            log.pending.append(await _pending(conn, scope))
            form = "filtered" if log.pending[-1] > PENDING_EXACT else "read_exactly"
            began = time.perf_counter()
            await call("retrieval", "query_memory", {"query": question, "scope": scope, "top_k": 10, "max_tokens": 2000})
            log.search_ms[form].append((time.perf_counter() - began) * 1000)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), SEARCH_EVERY_S)

    watchers = [asyncio.create_task(task()) for task in (ticker, locks, searcher)]
    try:
        if name == QUIET:  # searches only, until the phase's time is up
            await asyncio.sleep(seconds)
        else:
            await asyncio.gather(*[writer(n) for n in range(writers)], *([runs()] if name == "runs" else []))
    finally:
        done.set()
        await asyncio.gather(*watchers)
    wall = time.perf_counter() - started
    # Counted after the waiting facts: each fact written in the phase is in one count or the other.
    log.pending.append(await _pending(conn, scope))
    hot_copied = copied() - copied_before
    return {
        "phase": name, "wall_s": round(wall, 1), "writes": len(log.write_ms), "facts": log.facts,
        "facts_per_s": round(log.facts / wall, 1), "write_ms": {**latency_stats(log.write_ms),
                                                                "max": round(max(log.write_ms, default=0.0), 2)},
        "loop_late_ms": {"p99": round(percentile(log.late_ms, 99), 1), "max": round(max(log.late_ms, default=0.0), 1)},
        "lock_wait_samples": log.wait_samples, "lock_samples": log.samples,
        "samples_blocked_by_a_run": log.blocked_by_a_run,
        "lock_waits": _commonest(log.waits), "run_lock_waits": _commonest(log.run_waits),
        "pending": {"max": max(log.pending), "end": log.pending[-1]}, "hot_copied": hot_copied,
        "search_ms": {form: latency_stats(ms) for form, ms in log.search_ms.items()},
        "runs": _runs(log.runs, log.placed), "process_cpu_s": round(time.process_time() - cpu, 1),
        "run_process_cpu_s": round(run_process_cpu_seconds() - run_cpu, 1),
    }


def _search_steps(timings: list[tuple[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Each step of the phase's searches (`query_memory` requests in the retrieval service): p50 and
    p95 wall ms over the searches that took it, and in how many it ran."""
    searches = [t for verb, t in timings if verb == "query_memory"]
    names = sorted({name for t in searches for name in t})
    return {name: latency_stats([t[name] for t in searches if name in t]) for name in names}


def _commonest(counts: dict[str, int], n: int = 5) -> dict[str, int]:
    """The `n` entries of `counts` with the most samples, most first."""
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])[:n])


async def _pending(conn: psycopg.AsyncConnection, scope: str) -> int:
    """Facts of `scope` waiting in `hot_pending` for a run to copy them into the hot tier's indexes."""
    row = await (await conn.execute(PENDING, {"scope": scope})).fetchone()
    return int(row[0]) if row else 0


def _runs(spans: list[tuple[float, float]], placed: list[int]) -> dict[str, Any]:
    """Runs finished, their wall time, the lag bound (the longest start-to-next-end span) and the
    facts each run placed for the first time (those written since the run before it started)."""
    walls = [end - start for start, end in spans]
    lags = [spans[i + 1][1] - spans[i][0] for i in range(len(spans) - 1)]
    return {"n": len(spans), "wall_s_p50": round(percentile(walls, 50), 1), "wall_s_max": round(max(walls, default=0), 1),
            "lag_bound_s": round(max(lags, default=max(walls, default=0)), 1), "placed": placed}


def _summary(phases: list[dict[str, Any]]) -> dict[str, Any]:
    """Beside runs against alone, each pair of phases in turn: facts per second and write p95 as ratios;
    and each phase's search p50 and p95 against the quiet phase's."""
    quiet = next(p for p in phases if p["phase"] == QUIET)
    phases = [p for p in phases if p["phase"] != QUIET]
    pairs = [(phases[i], phases[i + 1]) for i in range(0, len(phases) - 1, 2)]
    return {
        "facts_per_s_ratio": [round(b["facts_per_s"] / a["facts_per_s"], 2) if a["facts_per_s"] else None
                              for a, b in pairs],
        "write_p95_ratio": [round(b["write_ms"]["p95"] / a["write_ms"]["p95"], 2) if a["write_ms"]["p95"] else None
                            for a, b in pairs],
        "loop_late_max_ms": {kind: max(p["loop_late_ms"]["max"] for p in phases if p["phase"] == kind)
                             for kind in ("alone", "runs")},
        "lock_wait_samples": {kind: sum(p["lock_wait_samples"] for p in phases if p["phase"] == kind)
                              for kind in ("alone", "runs")},
        "samples_blocked_by_a_run": sum(p["samples_blocked_by_a_run"] for p in phases),
        "search_vs_quiet": [_search_ratio(p, quiet) for p in phases],
    }


def _search_ratio(phase: dict[str, Any], quiet: dict[str, Any]) -> dict[str, float | None]:
    """The phase's search p50 and p95 over the quiet phase's (exactly read searches, the quiet form)."""
    now, base = phase["search_ms"]["read_exactly"], quiet["search_ms"]["read_exactly"]
    return {q: round(now[q] / base[q], 2) if now["n"] and base["n"] and base[q] else None for q in ("p50", "p95")}


def render_phase(phase: dict[str, Any]) -> str:
    w, late, r = phase["write_ms"], phase["loop_late_ms"], phase["runs"]
    line = (f"{phase['phase']:<5} {phase['wall_s']} s: {phase['writes']} writes, {phase['facts_per_s']} facts/s, "
            f"write p50 {w['p50']} p95 {w['p95']} max {w['max']} ms; loop late p99 {late['p99']} max {late['max']} ms; "
            f"lock waits in {phase['lock_wait_samples']} of {phase['lock_samples']} samples "
            f"({phase['samples_blocked_by_a_run']} blocked by a run); CPU {phase['process_cpu_s']} s of this process, "
            f"{phase['run_process_cpu_s']} s of the run process; facts pending at most {phase['pending']['max']}, "
            f"{phase['pending']['end']} at the end, {phase['hot_copied']} copied between runs; search p50 / p95 ms "
            + ", ".join(f"{form.replace('_', ' ')} {v['p50']} / {v['p95']} (n {v['n']})"
                        for form, v in phase["search_ms"].items()))
    top = sorted(phase.get("search_steps_ms", {}).items(), key=lambda kv: -kv[1]["p50"])[:8]
    if top:
        line += "; search steps p50 / p95 ms " + ", ".join(f"{n} {v['p50']} / {v['p95']}" for n, v in top)
    if r["n"]:
        line += (f"; {r['n']} runs, wall p50 {r['wall_s_p50']} s max {r['wall_s_max']} s, lag bound {r['lag_bound_s']} s,"
                 f" placed {', '.join(map(str, r['placed']))}")
    return line

