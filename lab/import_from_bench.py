"""Throughput and memory of `echo-memory import --from`, per source, beside the agent-history import.

    python -m lab.import_from_bench --records 5000 [--sources mcp-memory,basic-memory,mem0] [--history claude-code]

Starts a throw-away embedded Postgres, nats-server and the writes service (with the real
embedding model), writes a synthetic store of `--records` records in each source's format (an
MCP memory graph file, a basic-memory folder, a mem0 history database with updates), and runs
the real CLI against it as a child process: the read-only pass (`--dry-run`) and the import,
with records/s and the importer's own peak RSS (the service's memory is not in it). The same
number of agent-history turns (`--history`, lab/import_bench.py's synthetic histories) is
imported on the same system for comparison. `--read-only` runs only the read pass, without a
system: whether the importer's memory stays flat as the store grows. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sqlite3
import tempfile
from pathlib import Path

import psycopg
from pydantic import SecretStr

from echo_memory.libs.core.config import Settings
from echo_memory.libs.local.supervisor.nats import NatsServer
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.local.supervisor.postgres import EmbeddedPostgres
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.orgs import register_org
from echo_memory.libs.server.service.runner import start_service
from echo_memory.libs.server.store.schema import apply_migrations
from echo_memory.libs.testing import server_dir
from echo_memory.libs.testing.history_synth import write_history
from echo_memory.services.writes.app import routes
from lab.import_bench import _child

ORG = "bench-import-from"
SOURCES = ("mcp-memory", "basic-memory", "mem0")
WORDS = [
    "billing", "ledger", "cache", "queue", "deploy", "rollback", "schema", "index", "latency", "budget",
    "owner", "review", "incident", "postgres", "kafka", "redis", "oncall", "release", "canary", "metric",
    "alert", "quota", "tenant", "region", "backup",
]


def _sentence(rng: random.Random, i: int) -> str:
    return f"{' '.join(rng.choice(WORDS) for _ in range(8))} (note {i})"


def write_mcp_memory(path: Path, records: int) -> None:
    """Entities of nine observations each (ten records), the rest relations between them."""
    rng = random.Random(1)
    entities = max(1, records // 12)
    relations = records - entities * 10
    with path.open("w", encoding="utf-8") as out:
        for e in range(entities):
            out.write(json.dumps({"type": "entity", "name": f"Component {e:06d}", "entityType": "service",
                                  "observations": [_sentence(rng, e * 10 + k) for k in range(9)]}) + "\n")
        for r in range(relations):
            a, b = r % entities, (r * 7 + 1) % entities
            out.write(json.dumps({"type": "relation", "from": f"Component {a:06d}", "to": f"Component {b:06d}",
                                  "relationType": f"calls v{r // entities}"}) + "\n")


def write_basic_memory(root: Path, records: int) -> None:
    """Notes of six observations and three relations each (ten records)."""
    rng = random.Random(2)
    notes = max(1, records // 10)
    for n in range(notes):
        folder = root / f"area-{n // 200:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        body = [f"---\ntitle: Topic {n:06d}\ntype: note\npermalink: topics/topic-{n:06d}\ntags:\n- bench\n---\n",
                f"# Topic {n:06d}\n", "## Observations"]
        body += [f"- [fact] {_sentence(rng, n * 10 + k)}" for k in range(6)]
        body += ["", "## Relations"] + [f"- relates_to [[Topic {(n + k) % notes:06d}]]" for k in (1, 2, 3)]
        (folder / f"Topic {n:06d}.md").write_text("\n".join(body) + "\n", encoding="utf-8")


def write_mem0(path: Path, records: int) -> None:
    """mem0's history table: four ADDs for every UPDATE (a fifth of the records are new versions)."""
    rng = random.Random(3)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE history (id TEXT PRIMARY KEY, memory_id TEXT, old_memory TEXT, new_memory TEXT, "
                     "event TEXT, created_at DATETIME, updated_at DATETIME, is_deleted INTEGER, actor_id TEXT, "
                     "role TEXT)")
        adds = records - records // 5
        rows = [(f"h{i}", f"m{i:07d}", None, _sentence(rng, i), "ADD", f"2026-01-01T00:00:{i:07d}",
                 f"2026-01-01T00:00:{i:07d}", 0, None, "user") for i in range(adds)]
        rows += [(f"u{j}", f"m{j % adds:07d}", None, _sentence(rng, adds + j), "UPDATE", "2026-01-01",
                  f"2026-02-01T00:00:{j:07d}", 0, None, "user") for j in range(records - adds)]
        conn.executemany("INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)


def make(source: str, work: Path, records: int) -> Path:
    if source == "mcp-memory":
        path = work / "memory.jsonl"
        write_mcp_memory(path, records)
    elif source == "basic-memory":
        path = work / "kb"
        write_basic_memory(path, records)
    else:
        path = work / "history.db"
        write_mem0(path, records)
    return path


def _env(home: Path, nats_url: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")}, "HOME": str(home),
            "ECHO_MEMORY_HOME": str(home / "echo"), "ECHO_MEMORY_NATS_URL": nats_url, "ECHO_MEMORY_ORG": ORG}


async def bench(records: int, sources: list[str], history: str, work: Path) -> None:
    pg = EmbeddedPostgres(server_dir("bench-import-from-pg"), free_port(), durable=False)
    pg.start()
    nats_server = NatsServer(work / "nats", free_port())
    nats_server.start()
    try:
        with psycopg.connect(pg.url("postgres"), autocommit=True) as conn:
            conn.execute('CREATE DATABASE "bench_import_from"')
        url = pg.url("bench_import_from")
        apply_migrations(url)
        await register_org(nats_server.url, ORG, url)
        settings = Settings(org=ORG, database_url=SecretStr(url), nats_url=nats_server.url)
        service = await start_service("writes", routes, settings, embedder=MiniLM())
        try:
            print(f"{'source':<22} {'records':>7} {'read s':>7} {'read r/s':>9} {'import s':>9} {'import r/s':>10} "
                  f"{'written':>7} {'RSS read MiB':>12} {'RSS import MiB':>14}", flush=True)
            for source in sources:
                home = work / f"home-{source}"
                home.mkdir()
                path = make(source, home, records)
                env = _env(home, nats_server.url)
                read_s, read_kib, dry = await asyncio.to_thread(_child, env, work, "--from", source, str(path),
                                                                "--dry-run")
                import_s, peak_kib, report = await asyncio.to_thread(_child, env, work, "--from", source, str(path))
                result: dict[str, object] = report  # type: ignore[assignment]
                outcomes: dict[str, int] = result["outcomes"]  # type: ignore[assignment]
                written = outcomes["stored"] + outcomes["superseded"]
                assert int(dry["records"]) == records, dry  # type: ignore[call-overload]
                print(f"{'from ' + source:<22} {records:>7} {read_s:>7.1f} {records / read_s:>9.0f} {import_s:>9.1f} "
                      f"{records / import_s:>10.1f} {written:>7} {read_kib / 1024:>12.0f} {peak_kib / 1024:>14.0f}"
                      f"  {json.dumps({k: v for k, v in outcomes.items() if v})}", flush=True)
                shutil.rmtree(home, ignore_errors=True)
            if history == "none":
                return
            home = work / "home-history"
            (home / "repo" / ".git").mkdir(parents=True)
            write_history(home, history, records, max(1, records // 250), home / "repo")
            env = _env(home, nats_server.url)
            read_s, read_kib, _ = await asyncio.to_thread(_child, env, work, "--dry-run", "--source", history)
            import_s, peak_kib, turns = await asyncio.to_thread(_child, env, work, "--source", history)
            stored = sum(int(r["imported"]) for r in turns)  # type: ignore[call-overload]
            print(f"{'history ' + history:<22} {records:>7} {read_s:>7.1f} {records / read_s:>9.0f} {import_s:>9.1f} "
                  f"{stored / import_s:>10.1f} {stored:>7} {read_kib / 1024:>12.0f} {peak_kib / 1024:>14.0f}", flush=True)
        finally:
            await service.stop()
    finally:
        nats_server.stop()
        pg.stop()


def read_only(records: int, sources: list[str], work: Path) -> None:
    """Only the read pass (`--dry-run`, no system): records/s and whether the importer's memory stays flat."""
    print(f"{'source':<22} {'records':>7} {'read s':>7} {'read r/s':>9} {'RSS read MiB':>12}", flush=True)
    for source in sources:
        home = work / f"home-{source}"
        home.mkdir()
        path = make(source, home, records)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")}, "HOME": str(home),
               "ECHO_MEMORY_HOME": str(home / "echo")}
        took, kib, dry = _child(env, work, "--from", source, str(path), "--dry-run")
        assert int(dry["records"]) == records, dry  # type: ignore[call-overload]
        print(f"{'from ' + source:<22} {records:>7} {took:>7.1f} {records / took:>9.0f} {kib / 1024:>12.0f}", flush=True)
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--sources", default=",".join(SOURCES), help="comma-separated sources")
    parser.add_argument("--history", default="claude-code", help="agent-history format to compare with (none: skip)")
    parser.add_argument("--read-only", action="store_true", help="only the read pass; start no system")
    args = parser.parse_args()
    sources = [s for s in args.sources.split(",") if s]
    if set(sources) - set(SOURCES):
        raise SystemExit(f"unknown sources: {', '.join(sorted(set(sources) - set(SOURCES)))}")
    work = Path(tempfile.mkdtemp(prefix="echo-import-from-bench-"))
    try:
        if args.read_only:
            read_only(args.records, sources, work)
        else:
            asyncio.run(bench(args.records, sources, args.history, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
