"""`echo-memory benchmark`: write, query, digest and brief latency through the MCP edge and over the bus.

What each figure measures (all wall-clock, one request at a time, p50/p95 by nearest rank):
- **edge**: one `tools/call` of the real MCP SDK client over streamable HTTP with a bearer
  token, from sending the request to the parsed result: HTTP + token check + argument
  validation + one bus request + the service's work + rendering. The MCP session is opened once
  per run (as an agent's session is), so session set-up is not in the figure.
- **bus** ("in the service"): one NATS request/reply to the service as the admin identity, from
  the benchmark's own connection: the service's work (embedding the query, SQL, fusion, read log
  in one transaction) plus one NATS round trip and JSON (de)serialisation — about a millisecond
  more than the handler alone. Nothing is added to the services to measure it.

The session brief (`brief`) is measured after a `consolidate` of the scope over the bus (its wall
time is reported as `consolidate_s`), so it reads the digests of the store at that size; without a
bus, over whatever digests the running system already has.

Store sizes are cumulative in one throw-away scope: the store grows from one checkpoint to the
next. Up to 10k facts it is loaded through the real write path (`write_episode` over the bus, 50
facts per call, embeddings by the writes service); above 10k, when the benchmark started its own
system, through the documented COPY path (libs/local/eval/bulk.py), and the output says which was used.
1k is always measured when a size above 1k is asked for, for the 100k/1k ratio. The noise floor is
the smallest size's query set run twice, reported as the spread between the two runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from echo_memory.libs.server import eventloop
from echo_memory.libs.local.eval import synthetic
from echo_memory.libs.local.eval.metrics import latency_stats
from echo_memory.libs.local.eval.runner import progress

Call = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
WRITE_PATH_MAX = 10_000  # above this the throw-away system is bulk-loaded with COPY
RATIO_BASE = 1_000
WARMUP = 3
# Questions from another seed, asked at each size before the measured ones and not counted, so
# both sizes of the ratio are measured with Postgres' caches in the same (warm) state: right
# after a bulk load of 100k facts, HNSW pages are still cold, while 1k fits after a few queries.
WARM_SEED = 97


@dataclass
class Target:
    """How the benchmark reaches a system: an MCP session, and optionally the bus and the database.

    `bus` goes by name, as the eval runners' call does: the timer sends one tool name and its
    arguments through the edge and the bus alike, and times only the request, not a result model.
    """

    mcp: Callable[[], AbstractAsyncContextManager[Any]]
    bus: Call | None
    database_url: str | None
    description: str
    # Restart retrieval with ECHO_MEMORY_CHANNELS set to this JSON (None: back to the default);
    # only a throw-away system offers it.
    restart_retrieval: Callable[[str | None], Awaitable[None]] | None = None


class _Timer:
    """Times the same request through the edge and over the bus, and counts failures."""

    def __init__(self, target: Target, mcp: Any) -> None:
        self.target = target
        self.mcp = mcp
        self.errors: list[str] = []

    async def edge(self, tool: str, args: dict[str, Any]) -> float | None:
        started = time.perf_counter()
        result = await self.mcp.call_tool(tool, args)
        elapsed = (time.perf_counter() - started) * 1000
        if result.is_error:
            self.errors.append(f"edge {tool}: {result.structured_content or result.content}"[:300])
            return None
        if tool == "write_episode" and not (result.structured_content or {}).get("stored"):
            self.errors.append(f"edge write not stored: {result.structured_content}"[:300])
        if tool == "brief" and not (result.structured_content or {}).get("items"):
            self.errors.append(f"edge brief held no digest: {result.structured_content}"[:300])
        return elapsed

    async def bus(self, service: str, verb: str, args: dict[str, Any]) -> float | None:
        from echo_memory.libs.core.contracts.errors import EchoError

        assert self.target.bus is not None
        started = time.perf_counter()
        try:
            result = await self.target.bus(service, verb, args)
        except EchoError as exc:
            self.errors.append(f"bus {verb}: {exc.code}: {exc.message}"[:300])
            return None
        elapsed = (time.perf_counter() - started) * 1000
        if verb == "write_episode" and not result.get("stored"):
            self.errors.append(f"bus write not stored: {result}"[:300])
        if verb == "brief" and not result.get("items"):
            self.errors.append(f"bus brief held no digest: {result}"[:300])
        return elapsed

    async def pair(
        self, tool: str, service: str, requests: list[tuple[dict[str, Any], dict[str, Any]]]
    ) -> dict[str, dict[str, float]]:
        """Each request through both paths; which goes first alternates, so neither always meets
        the other's warm cache."""
        edge: list[float] = []
        bus: list[float] = []
        for index, (edge_args, bus_args) in enumerate(requests):
            order = ("edge", "bus") if index % 2 == 0 else ("bus", "edge")
            for path in order:
                if path == "edge":
                    value = await self.edge(tool, edge_args)
                    if value is not None:
                        edge.append(value)
                elif self.target.bus is not None:
                    value = await self.bus(service, tool, bus_args)
                    if value is not None:
                        bus.append(value)
        out = {"edge": latency_stats(edge)}
        if self.target.bus is not None:
            out["bus"] = latency_stats(bus)
        return out


def _query_requests(scope: str, questions: list[str]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    # The edge gives query_memory max_tokens=2000 when the caller sets none; the bus call says so.
    return [({"query": q, "scope": scope, "top_k": 10}, {"query": q, "scope": scope, "top_k": 10, "max_tokens": 2000})
            for q in questions]


def _digest_requests(scope: str, n: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    args = {"digest": True, "scope": scope, "top_k": 10}
    return [(args, {**args, "max_tokens": 2000}) for _ in range(n)]


def _brief_requests(scope: str, n: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    args = {"scope": scope}
    return [(args, args) for _ in range(n)]


async def _consolidate(target: Target, scope: str) -> float | None:
    """Wall seconds of one consolidation run of `scope` over the bus; None without a bus."""
    if target.bus is None:
        return None
    started = time.perf_counter()
    await target.bus("consolidation", "consolidate", {"scope": scope})
    return round(time.perf_counter() - started, 2)


def _write_requests(scope: str, source: synthetic.FactSource, n: int, tag: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """One-fact writes: a known entity (exact name) and a new one declared `new`, so each stores one edge."""
    known = sorted(source.known)
    out = []
    for i in range(2 * n):
        name = known[(tag * 7919 + i * 104729) % len(known)]
        target = f"{name} probe {tag}-{i}"
        detail = synthetic.DETAILS[i % len(synthetic.DETAILS)]
        out.append({
            "scope": scope, "session_id": f"benchmark-writes-{tag}", "project": "benchmark",
            "entities": [{"name": name, "type": name.rsplit(" ", 1)[-1]}, {"name": target, "type": "probe"}],
            "entity_resolutions": [{"mention": target, "entity_id": "new", "rationale": "benchmark probe"}],
            "facts": [{"source": name, "target": target, "relation": "reports to",
                       "fact": f"{name} reports {detail} to {target}.", "confidence": "extracted"}],
        })
    return [(out[2 * i], out[2 * i + 1]) for i in range(n)]


async def _load(
    target: Target, mcp: Any, scope: str, source: synthetic.FactSource, count: int, allow_copy: bool,
    size: int, show: bool,
) -> tuple[str, int]:
    """Add `count` facts; returns (path used, facts stored)."""
    if count <= 0:
        return "none", 0
    if allow_copy and size > WRITE_PATH_MAX and target.database_url is not None:
        from echo_memory.libs.local.eval.bulk import copy_facts
        from echo_memory.libs.server.embed import MiniLM

        label = f"embed+COPY to {size}"
        stored = await copy_facts(
            target.database_url, scope, source, count, MiniLM(threads=2),
            progress=(lambda done: progress(label, done, count)) if show else None,
        )
        return "COPY (libs/local/eval/bulk.py)", stored
    stored = 0
    path = "write_episode ×50 over the bus" if target.bus is not None else "write_episode ×50 through the edge"
    for facts in source.batches(count):
        args = source.write_args(facts, scope)
        if target.bus is not None:
            result = await target.bus("writes", "write_episode", args)
        else:
            called = await mcp.call_tool("write_episode", args)
            if called.is_error:
                raise RuntimeError(f"bulk write failed: {called.structured_content or called.content}")
            result = called.structured_content
        if not result.get("stored") or result.get("partial"):
            raise RuntimeError(f"a benchmark batch was not fully stored: {str(result)[:300]}")
        stored += len(result["edges_created"])
        if show:
            progress(f"write to {size}", stored, count)
    return path, stored


def checkpoints(sizes: list[int]) -> list[int]:
    """The sizes to measure: those asked for, plus 1k when a larger one is asked for (the ratio)."""
    points = set(sizes)
    if max(sizes) > RATIO_BASE:
        points.add(RATIO_BASE)
    return sorted(points)


async def run_benchmark(
    target: Target, scope: str, sizes: list[int], *, queries: int = 100, writes: int = 30, warm_queries: int = 0,
    digests: int | None = None, allow_copy: bool = True, show: bool = False,
) -> dict[str, Any]:
    """Measure at every checkpoint; returns the report (see `render` for the table)."""
    commit = _commit()  # the code under test is the code at start-up, whatever lands meanwhile
    questions = synthetic.questions(queries)
    warm = synthetic.questions(warm_queries, seed=WARM_SEED) if warm_queries else []
    source = synthetic.FactSource()
    rows: list[dict[str, Any]] = []
    noise: dict[str, Any] = {}
    stored = 0
    async with target.mcp() as mcp:
        timer = _Timer(target, mcp)
        for number, size in enumerate(checkpoints(sizes)):
            load_started = time.perf_counter()
            path, added = await _load(target, mcp, scope, source, size - stored, allow_copy, size, show)
            load_seconds = time.perf_counter() - load_started
            stored += added
            load_before = os.getloadavg()[0]
            for request in _query_requests(scope, warm):  # not counted; see WARM_SEED
                await timer.edge("query_memory", request[0])
            await timer.pair("query_memory", "retrieval", _query_requests(scope, questions[:WARMUP]))
            query = await timer.pair("query_memory", "retrieval", _query_requests(scope, questions))
            if number == 0:
                again = await timer.pair("query_memory", "retrieval", _query_requests(scope, questions))
                noise = {"size": size, "first": query, "second": again, "spread_p50_pct": {
                    k: round(100 * abs(query[k]["p50"] - again[k]["p50"]) / max(query[k]["p50"], 1e-9), 1)
                    for k in query}}
            await timer.pair("query_memory", "retrieval", _digest_requests(scope, WARMUP))
            digest = await timer.pair("query_memory", "retrieval", _digest_requests(scope, digests or max(5, queries // 2)))
            consolidate_s = await _consolidate(target, scope)
            await timer.pair("brief", "consolidation", _brief_requests(scope, WARMUP))
            brief = await timer.pair("brief", "consolidation", _brief_requests(scope, digests or max(5, queries // 2)))
            probes = _write_requests(scope, source, WARMUP + writes, number)
            await timer.pair("write_episode", "writes", probes[:WARMUP])
            write = await timer.pair("write_episode", "writes", probes[WARMUP:])
            facts_at_query = stored
            stored += (WARMUP + writes) * (2 if target.bus is not None else 1)
            rows.append({"size": size, "facts": facts_at_query, "load_path": path, "load_seconds": round(load_seconds, 1),
                         "query": query, "digest": digest, "brief": brief, "consolidate_s": consolidate_s,
                         "write": write,
                         "loadavg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)]})
            if show:
                sys.stderr.write(f"measured {size} facts: query edge p50 {query['edge']['p50']} ms\n")
        channel_costs = await _channel_costs(target, timer, scope, questions, show) if rows else {}
        errors = timer.errors
    report: dict[str, Any] = {
        "system": target.description, "scope": scope, "commit": commit, "cpus": os.cpu_count(),
        # The loop of this process: for a throw-away system, of every service and the edge too.
        "event_loop": eventloop.loop_name(),
        "queries": queries, "writes": writes, "warm_queries": warm_queries, "rows": rows, "noise_floor": noise, "errors": errors[:20],
        "error_count": len(errors), "ratio": _ratio(rows), "channel_costs": channel_costs,
    }
    return report


OPERATIONS = ("query", "digest", "brief", "write")
DIAGNOSTIC_CHANNELS = (("dense",), ("dense", "lexical"), ("dense", "graph"))


async def _channel_costs(
    target: Target, timer: _Timer, scope: str, questions: list[str], show: bool
) -> dict[str, dict[str, float]]:
    """Query p50/p95 over the bus at the largest size with only some channels switched on.

    A diagnostic, not a bar: it says which channel the time goes to. Needs a throw-away system
    (retrieval is restarted with ECHO_MEMORY_CHANNELS); empty otherwise.
    """
    if target.restart_retrieval is None or target.bus is None:
        return {}
    out: dict[str, dict[str, float]] = {}
    try:
        for channels in DIAGNOSTIC_CHANNELS:
            await target.restart_retrieval(json.dumps(list(channels)))
            requests = _query_requests(scope, questions)
            await timer.pair("query_memory", "retrieval", requests[:WARMUP])
            times = []
            for _, bus_args in requests:
                value = await timer.bus("retrieval", "query_memory", bus_args)
                if value is not None:
                    times.append(value)
            out["+".join(channels)] = latency_stats(times)
            if show:
                sys.stderr.write(f"channels {'+'.join(channels)}: bus p50 {out['+'.join(channels)]['p50']} ms\n")
    finally:
        await target.restart_retrieval(None)
    return out


def _ratio(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_size = {r["size"]: r for r in rows}
    base = RATIO_BASE if RATIO_BASE in by_size and max(by_size) > RATIO_BASE else min(by_size)
    top = max(by_size)
    out: dict[str, Any] = {"from": base, "to": top}
    for path in by_size[top]["query"]:
        low = by_size[base]["query"][path]["p50"]
        out[path] = round(by_size[top]["query"][path]["p50"] / low, 2) if low else None
    return out


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=Path(__file__).resolve().parents[3]).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def render(report: dict[str, Any]) -> str:
    """The report as a plain-text table (milliseconds)."""
    paths = [p for p in ("edge", "bus") if report["rows"] and p in report["rows"][0]["query"]]
    head = ["facts", "loaded via", "load s"]
    for op in OPERATIONS:
        head += [f"{op} {p} p50/p95" for p in paths]
    head.append("consolidate s")
    lines = [
        f"echo-memory benchmark — {report['system']}",
        f"commit {report['commit']}, {report['cpus']} CPUs, event loop {report.get('event_loop', '?')}, "
        f"{report['queries']} queries and {report['writes']} writes "
        f"per path and size ({report.get('warm_queries', 0)} uncounted warm-up queries of another seed first); "
        "milliseconds, one request at a time",
        "", " | ".join(head), " | ".join("---" for _ in head),
    ]
    for row in report["rows"]:
        cells = [f"{row['facts']:,}", row["load_path"], f"{row['load_seconds']}"]
        for op in OPERATIONS:
            cells += [f"{row[op][p]['p50']:.1f} / {row[op][p]['p95']:.1f}" for p in paths]
        cells.append("–" if row.get("consolidate_s") is None else f"{row['consolidate_s']}")
        lines.append(" | ".join(cells))
    ratio = report["ratio"]
    lines.append("")
    lines.append(f"query p50 ratio {ratio['to']:,}/{ratio['from']:,} facts: "
                 + ", ".join(f"{p} {ratio[p]}×" for p in paths if ratio.get(p) is not None))
    noise = report["noise_floor"]
    if noise:
        lines.append(f"noise floor ({noise['size']:,} facts, query set run twice): " + ", ".join(
            f"{p} p50 {noise['first'][p]['p50']} vs {noise['second'][p]['p50']} ms ({noise['spread_p50_pct'][p]}%)"
            for p in paths))
    lines.append("load average (1 min) per size: " + ", ".join(
        f"{r['facts']:,}: {r['loadavg_1m'][0]}→{r['loadavg_1m'][1]}" for r in report["rows"]))
    if report.get("channel_costs"):
        lines.append(f"diagnostic, query over the bus at {report['rows'][-1]['facts']:,} facts with only these channels: "
                     + ", ".join(f"{k} p50 {v['p50']} / p95 {v['p95']} ms" for k, v in report["channel_costs"].items()))
    if report["error_count"]:
        lines.append(f"{report['error_count']} request(s) failed; first: {report['errors'][0]}")
    return "\n".join(lines)


# -- the command -------------------------------------------------------------------------------

def register(sub: Any) -> None:
    bench = sub.add_parser(
        "benchmark", help="write, query, digest and brief latency through the MCP edge and over the bus, by store size"
    )
    bench.add_argument("--sizes", default="250,10000,100000", help="comma-separated store sizes in facts")
    bench.add_argument("--queries", type=int, default=100, help="queries per path and size")
    bench.add_argument("--writes", type=int, default=30, help="one-fact writes per path and size")
    bench.add_argument(
        "--warm-queries", type=int, default=30,
        help="uncounted queries (other questions) at each size before measuring, so every size is measured warm",
    )
    bench.add_argument("--url", help="edge URL of a running system (default: start a throw-away one)")
    bench.add_argument("--token", help="bearer token for --url (default ECHO_MEMORY_TOKEN)")
    bench.add_argument("--scope", help="with --url: an existing scope the token may read and write")
    bench.add_argument("--no-copy", action="store_true", help="load every size through write_episode")
    bench.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    bench.add_argument(
        "--concurrency",
        help="comma-separated client counts, e.g. 1,4,16: throughput of many agents at once against a throw-away "
        "embedded system (its default process layout; ECHO_MEMORY_SERVICES_IN_ONE_PROCESS=0 passes through), "
        "with CPU per query and memory (libs/local/eval/concurrency.py)",
    )
    bench.set_defaults(func=main)


def _parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(s < 1 for s in sizes):
        raise ValueError("--sizes takes positive integers, e.g. 250,10000,100000")
    return sizes


def main(settings: Any, args: Any) -> int:
    try:
        sizes = _parse_sizes(args.sizes)
    except ValueError as exc:
        print(f"echo-memory benchmark: {exc}", file=sys.stderr)
        return 2
    if args.queries < 1 or args.writes < 1 or args.warm_queries < 0:
        print("echo-memory benchmark: --queries and --writes must be at least 1, --warm-queries at least 0",
              file=sys.stderr)
        return 2
    if args.concurrency:
        return _concurrency(settings, args, sizes)
    if args.url:
        token = args.token or (settings.token.get_secret_value() if settings.token else None)
        if not token or not args.scope:
            print("echo-memory benchmark: --url needs --token (or ECHO_MEMORY_TOKEN) and --scope", file=sys.stderr)
            return 2
        report = eventloop.run(_against_running(settings, args, sizes, token), use_uvloop=settings.uvloop)
    else:
        report = eventloop.run(_throwaway(args, sizes), use_uvloop=settings.uvloop)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 1 if report["error_count"] else 0


def _concurrency(settings: Any, args: Any, sizes: list[int]) -> int:
    from echo_memory.libs.local.eval.concurrency import render as render_concurrency
    from echo_memory.libs.local.eval.concurrency import run_concurrency

    try:
        levels = _parse_sizes(args.concurrency)
    except ValueError:
        print("echo-memory benchmark: --concurrency takes positive integers, e.g. 1,4,16", file=sys.stderr)
        return 2
    report = eventloop.run(run_concurrency(levels, sizes, args.queries, args.writes), use_uvloop=settings.uvloop)
    print(json.dumps(report, indent=2) if args.json else render_concurrency(report))
    failed = sum(level["failed"] for row in report["sizes"] for path in ("edge", "bus") for level in row[path])
    return 1 if failed else 0


async def _throwaway(args: Any, sizes: list[int]) -> dict[str, Any]:
    from echo_memory.libs.local.eval.runner import new_scope
    from echo_memory.libs.local.eval.system import channel_settings, restart_service, stack_call, throwaway_stack

    async with throwaway_stack() as stack:
        call = stack_call(stack, timeout=120)
        scope = await new_scope(call, "bench")
        token = await asyncio.to_thread(stack.issue_token, "benchmark", [scope], [scope])

        async def restart(channels: str | None) -> None:
            await restart_service(stack, "retrieval", retrieval=channel_settings(channels))

        target = Target(
            mcp=lambda: stack.client(token), bus=call, database_url=stack.database_url, restart_retrieval=restart,
            description="throw-away system (embedded Postgres + nats-server + every service and the HTTP edge "
            "in one process via EchoStack)",
        )
        return await run_benchmark(target, scope, sizes, queries=args.queries, writes=args.writes,
                                   warm_queries=args.warm_queries, allow_copy=not args.no_copy, show=True)


async def _against_running(settings: Any, args: Any, sizes: list[int], token: str) -> dict[str, Any]:
    from echo_memory.libs.server.bus.client import BusClient
    from echo_memory.libs.local.connection import ADMIN_AGENT, NotRunning, connect_bus
    from echo_memory.libs.core.contracts.bus import Caller

    broker = None
    bus: Call | None = None
    try:
        broker = await connect_bus(settings)  # BusUnreachable (a sentence) when its NATS does not answer
        client = BusClient(broker)
        caller = Caller(org=settings.org, agent_id=ADMIN_AGENT, read_scopes=["*"], write_scopes=["*"])

        async def bus(service: str, verb: str, body: dict[str, Any]) -> dict[str, Any]:
            return await client.call_by_name(caller=caller, service=service, verb=verb, args=body, timeout=120)
    except NotRunning:
        broker = None  # no bus on this host: edge figures only, loading through the edge
    target = Target(mcp=lambda: _mcp(args.url, token), bus=bus if broker else None, database_url=None,
                    description=f"running system at {args.url}")
    try:
        return await run_benchmark(target, args.scope, sizes, queries=args.queries, writes=args.writes,
                                   warm_queries=args.warm_queries,
                                   allow_copy=False, show=True)
    finally:
        if broker is not None:
            await broker.stop()


def _mcp(url: str, token: str) -> AbstractAsyncContextManager[Any]:
    from echo_memory.libs.local.stack import mcp_http_client  # imported late: it pulls in the in-process harness

    return mcp_http_client(url, token)
