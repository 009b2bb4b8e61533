"""Where a write's and a query's time goes: per-step milliseconds at 1k and 10k facts, over the bus.

    python -m lab.write_profile --writes 60 --queries 60 --sizes 1000,10000

Starts a throw-away system (libs/local/eval/system.py), loads one scope to each size (through
write_episode up to 1k, then COPY via libs/local/eval/bulk.py), and sends N one-fact writes (a known
entity by exact name and a new one declared `new`, as `echo-memory benchmark` does) and N
query_memory calls over the bus, one at a time. Each request's step durations come from
libs/server/telemetry/steps.py, switched on for this process only. Prints JSON: per size, the p50 and
spread (p10–p90) of the client's round trip and of every step. Steps overlap where work runs at
the same time (the embedding threads beside SQL), so they do not sum to the total.
A measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from echo_memory.libs.local.eval import synthetic
from echo_memory.libs.local.eval.bulk import copy_facts
from echo_memory.libs.local.eval.runner import new_scope
from echo_memory.libs.local.eval.system import stack_call, throwaway_stack
from echo_memory.libs.server import eventloop
from echo_memory.libs.server.telemetry import steps

WARMUP = 10
WRITE_PATH_MAX = 1000  # above this many facts, the store is loaded with COPY


def _write_args(scope: str, known: list[str], i: int) -> dict[str, Any]:
    name = known[(i * 104729) % len(known)]
    target = f"{name} probe {i}"
    detail = synthetic.DETAILS[i % len(synthetic.DETAILS)]
    return {
        "scope": scope, "session_id": "write-profile", "project": "profile",
        "entities": [{"name": name, "type": name.rsplit(" ", 1)[-1]}, {"name": target, "type": "probe"}],
        "entity_resolutions": [{"mention": target, "entity_id": "new", "rationale": "profile probe"}],
        "facts": [{"source": name, "target": target, "relation": "reports to",
                   "fact": f"{name} reports {detail} to {target}.", "confidence": "extracted"}],
    }


def _spread(values: list[float]) -> dict[str, float]:
    if len(values) < 2:
        only = round(values[0], 2) if values else 0.0
        return {"p50": only, "p10": only, "p90": only}
    deciles = statistics.quantiles(values, n=10)
    return {"p50": round(statistics.median(values), 2), "p10": round(deciles[0], 2), "p90": round(deciles[-1], 2)}


def _summary(round_trips: list[float], timings: list[dict[str, float]]) -> dict[str, Any]:
    names = sorted({name for t in timings for name in t})
    # A step a request did not run counts 0 for it, so p50s compare across requests.
    return {"bus_round_trip": _spread(round_trips),
            "steps": {name: _spread([t.get(name, 0.0) for t in timings]) for name in names}}


async def _measure(call: Any, sink: list[tuple[str, dict[str, float]]], verb: str, service: str,
                   requests: list[dict[str, Any]]) -> dict[str, Any]:
    round_trips: list[float] = []
    timings: list[dict[str, float]] = []
    for index, body in enumerate(requests):
        sink.clear()
        started = time.perf_counter()
        result = await call(service, verb, body)
        elapsed = (time.perf_counter() - started) * 1000
        if verb == "write_episode" and not result.get("stored"):
            raise RuntimeError(f"a profile write was not stored: {str(result)[:300]}")
        if index < WARMUP:
            continue
        round_trips.append(elapsed)
        timings.extend(t for v, t in sink if v == verb)
    return _summary(round_trips, timings)


async def _load(call: Any, database_url: str, scope: str, source: synthetic.FactSource, count: int,
                stack: Any) -> None:
    if count <= 0:
        return
    if count > WRITE_PATH_MAX:
        await copy_facts(database_url, scope, source, count, stack.embedder)
        return
    for facts in source.batches(count):
        result = await call("writes", "write_episode", source.write_args(facts, scope))
        if not result.get("stored") or result.get("partial"):
            raise RuntimeError(f"a load batch was not fully stored: {str(result)[:300]}")


async def profile(sizes: list[int], writes: int, queries: int) -> dict[str, Any]:
    """Per size: the write and query summaries (see `_summary`)."""
    report: dict[str, Any] = {"writes": writes, "queries": queries, "warmup": WARMUP, "sizes": {}}
    async with throwaway_stack() as stack:
        call = stack_call(stack, timeout=600)
        scope = await new_scope(call, "profile")
        source = synthetic.FactSource()
        sink = steps.collect()
        loaded = 0
        probe = 0
        try:
            for size in sorted(sizes):
                # The probes themselves add facts: load only what is missing to reach the size.
                await _load(call, stack.database_url, scope, source, size - loaded, stack)
                loaded = max(loaded, size)
                known = sorted(source.known)
                bodies = [_write_args(scope, known, probe + i) for i in range(WARMUP + writes)]
                probe += len(bodies)
                questions = synthetic.questions(WARMUP + queries, seed=size)
                query_bodies = [{"query": q, "scope": scope, "top_k": 10} for q in questions]
                write = await _measure(call, sink, "write_episode", "writes", bodies)
                query = await _measure(call, sink, "query_memory", "retrieval", query_bodies)
                loaded += len(bodies)
                report["sizes"][str(size)] = {"write": write, "query": query}
                sys.stderr.write(f"{size} facts: write p50 {write['bus_round_trip']['p50']} ms, "
                                 f"query p50 {query['bus_round_trip']['p50']} ms\n")
        finally:
            steps.stop()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="store sizes in facts, comma-separated")
    parser.add_argument("--writes", type=int, default=60, help="measured one-fact writes per size")
    parser.add_argument("--queries", type=int, default=60, help="measured queries per size")
    args = parser.parse_args(argv)
    try:
        sizes = [int(part) for part in args.sizes.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(size < 1 for size in sizes) or args.writes < 1 or args.queries < 1:
        sys.stderr.write("write_profile: --sizes takes positive integers; --writes and --queries at least 1\n")
        return 2
    report = eventloop.run(profile(sizes, args.writes, args.queries), use_uvloop=True)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
