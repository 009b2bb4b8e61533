"""`echo-memory benchmark --concurrency 1,4,16`: many agents at once against the embedded default.

Unlike the latency benchmark (one request at a time, services in one process), this starts the
real embedded system (`echo-memory up --detach`: Postgres, nats-server, the services' process or
processes, the edge) in a throw-away data directory, so each service's worker count and the two cores are
what a laptop user gets. For each store size and each concurrency level C it runs C MCP sessions
(and, separately, C bus callers) side by side, each asking questions back to back, and reports:
- throughput (queries/s over the level's wall time) and p50/p95 latency per level;
- CPU seconds per query by process (Postgres, nats-server, the services, the edge), from the
  processes' own CPU counters before and after the level, and the askers' own CPU (they run in this
  process on the same cores, so "cores busy with clients" is how much of the machine the level used);
- write p50/p95 over the bus (one one-fact write at a time);
- the proportional set size (PSS) of every process of the system at 1k facts, and its peak.
Figures only: nothing here is asserted.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import psutil
import psycopg

from echo_memory.libs.core.contracts.admin import ScopeCreateInput, TokenCreateInput
from echo_memory.libs.core.contracts.query import QueryMemoryInput
from echo_memory.libs.core.contracts.verbs import QUERY_MEMORY, SCOPE_CREATE, TOKEN_CREATE, WRITE_EPISODE, In, Out, Verb
from echo_memory.libs.core.contracts.write import WriteEpisodeInput
from echo_memory.libs.local.eval import synthetic
from echo_memory.libs.local.eval.metrics import latency_stats

SCOPE = "bench-concurrency"


class AdminCall(Protocol):
    """`verb`'s result for `args`, asked over the bus as the org's admin identity."""

    async def __call__(self, verb: Verb[In, Out], args: In) -> Out: ...


class System:
    """A running embedded system in its own data directory; `processes()` maps component → psutil processes."""

    def __init__(self, home: Path) -> None:
        self.home = home
        # The caller's worker counts and process layout pass through (a side-by-side run with
        # ECHO_MEMORY_WORKERS__RETRIEVAL=1 or ECHO_MEMORY_SERVICES_IN_ONE_PROCESS=0); nothing else of the
        # caller's configuration reaches the throw-away system.
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("ECHO_MEMORY_") or k.startswith("ECHO_MEMORY_WORKERS__")
                    or k == "ECHO_MEMORY_SERVICES_IN_ONE_PROCESS"}
        # One token makes thousands of calls on purpose.
        self.env.update(ECHO_MEMORY_HOME=str(home), ECHO_MEMORY_EDGE_RATE_PER_MINUTE="0")

    def command(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run(
            [sys.executable, "-c", "import sys; from echo_memory.libs.local.cli.main import main; sys.exit(main())", *args],
            env=self.env, capture_output=True, text=True, timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"echo-memory {' '.join(args)} failed ({done.returncode}): {done.stderr[-800:]}")
        return done.stdout

    def state(self) -> Any:
        from echo_memory.libs.local.supervisor.state import read_state

        state = read_state(self.home)
        if state is None:
            raise RuntimeError("the throw-away system wrote no state.json")
        return state

    def analyze(self) -> None:
        """VACUUM ANALYZE the memory tables, as autovacuum does within a minute or so of a large load.

        Until then the planner works from the empty tables' statistics, and a level measured in that
        window pays for plans it would not use a minute later.
        """
        from echo_memory.libs.local.eval.bulk import VACUUM
        from echo_memory.libs.local.supervisor.postgres import EmbeddedPostgres

        url = EmbeddedPostgres(self.home / "postgres", self.state().pg_port or 0).url()
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in VACUUM:
                conn.execute(statement)

    def processes(self) -> dict[str, list[psutil.Process]]:
        """Each process's tree (Postgres with its backends), plus the supervisor, by the components it runs.

        Services sharing one process are one entry, "services", so nothing is counted twice.
        """
        state = self.state()
        out: dict[str, list[psutil.Process]] = {"supervisor": [psutil.Process(state.supervisor_pid)]}
        names_of: dict[int, list[str]] = {}
        for name, component in state.components.items():
            if component.pid is not None:
                names_of.setdefault(component.pid, []).append(name)
        for pid, names in names_of.items():
            try:
                root = psutil.Process(pid)
                out[names[0] if len(names) == 1 else "services"] = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
        return out

    def cpu(self) -> dict[str, float]:
        """CPU seconds (user + system) used so far, per component."""
        return {name: cpu_seconds(procs) for name, procs in self.processes().items()}

    def pss_mb(self) -> dict[str, float]:
        """Proportional set size per component, in MB (shared pages split between their users)."""
        sizes: dict[str, float] = {}
        for name, procs in self.processes().items():
            total = 0
            for proc in procs:
                try:
                    total += proc.memory_full_info().pss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            sizes[name] = round(total / 1e6, 1)
        return sizes


def cpu_seconds(procs: Iterable[psutil.Process]) -> float:
    """CPU seconds (user + system) `procs` have used so far; a process gone meanwhile counts 0."""
    seconds = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        seconds += times.user + times.system
    return seconds


def tree_cpu_seconds(root: psutil.Process) -> float:
    """CPU seconds of `root`, of every process under it now, and of its children that ended and
    were reaped (Postgres backends and autovacuum workers that came and went; 0 if `root` is gone)."""
    try:
        own = root.cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return own.children_user + own.children_system + cpu_seconds([root, *root.children(recursive=True)])


def run_process_cpu_seconds() -> float:
    """CPU seconds of this process's children that multiprocessing spawned (the consolidation
    service's run processes, one per run) and of its children that ended and were reaped."""
    ended = os.times()
    return ended.children_user + ended.children_system + cpu_seconds(
        p for p in psutil.Process().children() if _spawned(p))


def _spawned(proc: psutil.Process) -> bool:
    try:
        return "spawn_main" in " ".join(proc.cmdline())
    except psutil.NoSuchProcess:
        return False


@asynccontextmanager
async def embedded_system() -> AsyncIterator[tuple[System, AdminCall, str, str]]:
    """`up --detach` in a temporary home; yields the system, an admin bus call, the edge URL and a token."""
    from echo_memory.libs.core.contracts.bus import Caller
    from echo_memory.libs.local.supervisor.bus_auth import credentials_file
    from echo_memory.libs.server.bus.auth import read_credentials
    from echo_memory.libs.server.bus.broker import make_broker
    from echo_memory.libs.server.bus.client import BusClient
    from echo_memory.libs.server.bus.permissions import ADMIN_USER

    home = Path(tempfile.mkdtemp(prefix="echo-concurrency-", dir="/tmp"))
    system = System(home)
    broker = None
    try:
        await asyncio.to_thread(system.command, "up", "--detach")
        state = system.state()
        broker = make_broker(state.nats_url, credentials=read_credentials(credentials_file(home, ADMIN_USER)))
        await broker.start()
        bus = BusClient(broker)
        admin = Caller(org=state.org, agent_id="admin", read_scopes=["*"], write_scopes=["*"])

        async def call(verb: Verb[In, Out], args: In) -> Out:
            return await bus.call(verb, args, caller=admin, timeout=600)

        await call(SCOPE_CREATE, ScopeCreateInput(name=SCOPE))
        created = await call(TOKEN_CREATE, TokenCreateInput(agent_id="bench", read_scopes=[SCOPE], write_scopes=[SCOPE]))
        yield system, call, str(state.edge_url), created.token
    finally:
        if broker is not None:
            await broker.stop()
        try:
            await asyncio.to_thread(system.command, "down")
        finally:
            shutil.rmtree(home, ignore_errors=True)


def _write(source: synthetic.FactSource, facts: list[synthetic.Fact]) -> WriteEpisodeInput:
    return WriteEpisodeInput.model_validate(source.write_args(facts, SCOPE))


async def _load(call: AdminCall, source: synthetic.FactSource, count: int) -> None:
    for facts in source.batches(count):
        result = await call(WRITE_EPISODE, _write(source, facts))
        if not result.stored or result.partial:
            raise RuntimeError(f"a benchmark batch was not fully stored: {str(result.model_dump())[:300]}")


Asker = Callable[[str], Awaitable[None]]

# After a load (and its VACUUM ANALYZE), each size waits until Postgres is this idle, or gives up, so no
# level pays for background work that belongs to the load.
IDLE_CPU_SHARE = 0.05
SETTLE_MAX_SECONDS = 120.0


async def _settle(system: System) -> float:
    """Seconds waited until Postgres used under IDLE_CPU_SHARE of a core over one second."""
    started = time.perf_counter()
    while time.perf_counter() - started < SETTLE_MAX_SECONDS:
        before = (await asyncio.to_thread(system.cpu)).get("postgres", 0.0)
        await asyncio.sleep(1.0)
        if (await asyncio.to_thread(system.cpu)).get("postgres", 0.0) - before < IDLE_CPU_SHARE:
            break
    return round(time.perf_counter() - started, 1)


class _EdgeSessions:
    """One MCP session per client, each asking query_memory through the edge; closed last-opened first."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.stack = AsyncExitStack()

    async def open(self, _: int) -> Asker:
        from echo_memory.libs.local.stack import mcp_http_client

        client = await self.stack.enter_async_context(mcp_http_client(self.url, self.token))

        async def ask(text: str) -> None:
            result = await client.call_tool("query_memory", {"query": text, "scope": SCOPE})
            if result.is_error:
                raise RuntimeError(str(result.content)[:200])

        return ask

    async def close(self) -> None:
        await self.stack.aclose()


class _BusAskers:
    """Callers that ask query_memory over the bus, as the admin identity, sharing one connection."""

    def __init__(self, call: AdminCall) -> None:
        self.call = call

    async def open(self, _: int) -> Asker:
        async def ask(text: str) -> None:
            await self.call(QUERY_MEMORY, QueryMemoryInput(query=text, scope=SCOPE))

        return ask

    async def close(self) -> None:
        return None


async def _level(
    system: System, clients: int, questions: list[str], ask: Callable[[int], Awaitable[Callable[[str], Awaitable[None]]]],
    close: Callable[[], Awaitable[None]],
) -> dict[str, Any]:
    """`clients` askers share `questions`, each asking back to back; throughput, latency, CPU per query."""
    askers = [await ask(i) for i in range(clients)]
    latencies: list[float] = []
    failures = 0
    queue = list(questions)

    async def worker(asker: Callable[[str], Awaitable[None]]) -> None:
        nonlocal failures
        while queue:
            question = queue.pop()
            started = time.perf_counter()
            try:
                await asker(question)
            except Exception:  # counted and reported; the level goes on
                failures += 1
                continue
            latencies.append((time.perf_counter() - started) * 1000)

    before, clients_before = system.cpu(), _own_cpu()
    started = time.perf_counter()
    await asyncio.gather(*(worker(a) for a in askers))
    wall = time.perf_counter() - started
    after, clients_after = system.cpu(), _own_cpu()
    await close()
    done = max(len(latencies), 1)
    cpu = {name: round((after.get(name, 0.0) - before.get(name, 0.0)) * 1000 / done, 2) for name in after}
    system_cores = (sum(after.values()) - sum(before.values())) / wall if wall else 0.0
    client_cores = (clients_after - clients_before) / wall if wall else 0.0
    return {
        "clients": clients, "queries": len(latencies), "failed": failures, "wall_s": round(wall, 2),
        "qps": round(len(latencies) / wall, 1), **latency_stats(latencies),
        "cpu_ms_per_query": {"total": round(sum(cpu.values()), 2), **cpu},
        "client_cpu_ms_per_query": round((clients_after - clients_before) * 1000 / done, 2),
        "cores_busy": round(system_cores, 2),
        # The askers run in this process on the same cores: with them, how much of the machine was used.
        "cores_busy_with_clients": round(system_cores + client_cores, 2),
    }


def _own_cpu() -> float:
    """CPU seconds this benchmark process (the askers: MCP sessions or bus callers) has used."""
    times = psutil.Process().cpu_times()
    return float(times.user + times.system)


async def run_concurrency(levels: list[int], sizes: list[int], queries: int, writes: int) -> dict[str, Any]:
    """The report: memory at 1k facts, then per size the edge and bus levels and the write latency."""
    report: dict[str, Any] = {"levels": levels, "sizes": [], "memory": {}}
    source = synthetic.FactSource(seed=7)
    peak: dict[str, float] = {}
    async with embedded_system() as (system, call, url, token):
        loaded = 0
        for size in sorted({1_000, *sizes}):
            await _load(call, source, size - loaded)
            loaded = size
            asked = synthetic.questions(queries, seed=11 + size)
            for question in asked[:5]:  # warm caches and the model before measuring
                await call(QUERY_MEMORY, QueryMemoryInput(query=question, scope=SCOPE))
            await asyncio.to_thread(system.analyze)
            report.setdefault("settled_s", {})[str(size)] = await _settle(system)
            pss = system.pss_mb()
            peak = {k: max(v, peak.get(k, 0.0)) for k, v in pss.items()}
            if size == 1_000:
                report["memory"]["pss_mb_at_1k"] = {"total": round(sum(pss.values()), 1), **pss}
            if size not in sizes:
                continue
            row: dict[str, Any] = {"size": size, "edge": [], "bus": []}
            for clients in levels:
                edge = _EdgeSessions(url, token)
                row["edge"].append(await _level(system, clients, asked, edge.open, edge.close))
                bus = _BusAskers(call)
                row["bus"].append(await _level(system, clients, asked, bus.open, bus.close))
            write_ms: list[float] = []
            for facts in source.batches(writes, size=1):
                request = _write(source, facts)  # validated before the clock starts: the figure is the request
                started = time.perf_counter()
                await call(WRITE_EPISODE, request)
                write_ms.append((time.perf_counter() - started) * 1000)
            loaded += writes
            row["write_bus"] = latency_stats(write_ms)
            report["sizes"].append(row)
        report["memory"]["peak_pss_mb"] = {"total": round(sum(peak.values()), 1), **peak}
    return report


def render(report: dict[str, Any]) -> str:
    """The report as a table: one line per size, path and level."""
    lines = []
    at_1k = report["memory"].get("pss_mb_at_1k", {})
    lines.append(f"memory (PSS) at 1k facts: {at_1k.get('total')} MB  "
                 + ", ".join(f"{k} {v}" for k, v in at_1k.items() if k != "total"))
    lines.append(f"peak PSS: {report['memory'].get('peak_pss_mb', {}).get('total')} MB")
    settled = report.get("settled_s", {})
    if settled:
        lines.append("waited for Postgres to settle after each load: "
                     + ", ".join(f"{size} facts {seconds} s" for size, seconds in settled.items()))
    lines.append(f"{'size':>7} {'path':<5} {'C':>3} {'q/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'cores':>6} "
                 f"{'+clients':>8} {'CPU ms/q':>9}  failed  CPU by component (ms/q)")
    for row in report["sizes"]:
        for path in ("edge", "bus"):
            for level in row[path]:
                cpu = level["cpu_ms_per_query"]
                parts = ", ".join(f"{k} {v}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])
                                  if k != "total" and v >= 0.05)
                lines.append(
                    f"{row['size']:>7} {path:<5} {level['clients']:>3} {level['qps']:>7} {level['p50']:>8} "
                    f"{level['p95']:>8} {level['cores_busy']:>6.2f} {level['cores_busy_with_clients']:>8.2f} "
                    f"{cpu['total']:>9}  {level['failed']:>6}  {parts}"
                )
        lines.append(f"{row['size']:>7} write over the bus: p50 {row['write_bus']['p50']} ms, "
                     f"p95 {row['write_bus']['p95']} ms (n={row['write_bus']['n']})")
    for row in report["sizes"]:
        edge = {lv["clients"]: lv["qps"] for lv in row["edge"]}
        if 1 in edge and edge[1]:
            ratios = ", ".join(f"{c}: {q / edge[1]:.2f}×" for c, q in edge.items() if c != 1)
            lines.append(f"{row['size']:>7} edge throughput against one client: {ratios}")
    return "\n".join(lines)
