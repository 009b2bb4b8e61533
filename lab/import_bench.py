"""Agent-history import throughput and memory, per client format, over a real bus, writes service and Postgres.

    python lab/import_bench.py --turns 50000 [--conversations 200] [--sources codex,claude-code] [--read-only]

Starts a throw-away embedded Postgres and nats-server and the writes service (with the real
embedding model), writes a synthetic history of `--turns` complete turns in each client's
on-disk format (libs/testing/history_synth.py) into a temporary home, and runs the real CLI,
`echo-memory import --source S`, as a child process against it. Per format it prints the
read-only pass (`--dry-run`: parsing, redaction, no store), the import (embedding-bound), the
turns stored, turns/s, and the importer's peak RSS (VmHWM of the child after exec; the service's
memory is not in it). `--read-only` runs only the read pass (no system is started): parsing
and redaction speed, and whether the importer's memory stays flat as the history grows.
A measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from pydantic import SecretStr

from echo_memory.libs.core.config import Settings
from echo_memory.libs.local.history.sources import SOURCE_NAMES
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

ORG = "bench-import"
ROOT = Path(__file__).resolve().parents[1]


# The CLI run with its own peak RSS written at exit: VmHWM of the process after exec (wait4's
# ru_maxrss would also count the parent's pages the child inherited at fork).
_PEAK = ("import atexit, sys\n"
         "out_arg = sys.argv[1]\n"
         "def _peak():\n"
         "    with open('/proc/self/status') as s, open(out_arg, 'w') as out:\n"
         "        out.write(next(line.split()[1] for line in s if line.startswith('VmHWM')))\n"
         "atexit.register(_peak)\n"
         "sys.argv = ['echo-memory', *sys.argv[2:]]\n"
         "from echo_memory.libs.local.cli.main import main\n"
         "sys.exit(main())\n")


def _child(env: dict[str, str], work: Path, *args: str) -> tuple[float, int, list[dict[str, object]]]:
    """(seconds, the child's own peak RSS in KiB, the CLI's JSON report)."""
    out_path, err_path, peak_path = work / "child.out", work / "child.err", work / "child.peak"
    started = time.monotonic()
    with out_path.open("w") as out, err_path.open("w") as err:
        done = subprocess.run([sys.executable, "-c", _PEAK, str(peak_path), "import", "--json", "--quiet", *args],
                              env=env, cwd=ROOT, stdout=out, stderr=err, check=False)
    took = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"import {' '.join(args)} failed: {err_path.read_text().strip()}")
    return took, int(peak_path.read_text()), json.loads(out_path.read_text())


async def _file_latency(env: dict[str, str], work: Path, home: Path) -> None:
    """What the capture hook pays: `import --file` on an imported transcript, unchanged and with one new turn."""
    path = sorted((home / ".claude" / "projects").rglob("*.jsonl"))[0]
    idle, _, _ = await asyncio.to_thread(_child, env, work, "--source", "claude-code", "--file", str(path))
    session = path.stem
    with path.open("a", encoding="utf-8") as out:
        for kind, uid, content in (("user", "extra-u", "One more question about the pool"),
                                   ("assistant", "extra-a", [{"type": "text", "text": "One more answer."}])):
            out.write(json.dumps({"type": kind, "uuid": uid, "sessionId": session, "timestamp": "2026-12-01T00:00:00Z",
                                  "message": {"role": kind, "content": content}}) + "\n")
    one, _, report = await asyncio.to_thread(_child, env, work, "--source", "claude-code", "--file", str(path))
    print(f"--file latency (claude-code, {path.stat().st_size // 1024} KiB transcript): unchanged {idle:.2f} s, "
          f"one new turn {one:.2f} s (stored {report[0]['imported']})", flush=True)


def read_only(turns: int, conversations: int, sources: list[str], work: Path) -> None:
    print(f"{'format':<15} {'turns':>7} {'files MiB':>9} {'read s':>7} {'read t/s':>9} {'RSS read MiB':>12}")
    for source in sources:
        home = work / f"home-{source}"
        repo = home / "repo"
        (repo / ".git").mkdir(parents=True)
        write_history(home, source, turns, conversations, repo)
        size = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")},
               "HOME": str(home), "ECHO_MEMORY_HOME": str(home / "echo")}
        took, kib, dry = _child(env, work, "--dry-run", "--source", source)
        assert int(dry[0]["turns"]) == turns, dry  # type: ignore[call-overload]
        print(f"{source:<15} {turns:>7} {size / 2**20:>9.1f} {took:>7.1f} {turns / took:>9.0f} {kib / 1024:>12.0f}",
              flush=True)
        shutil.rmtree(home, ignore_errors=True)


async def bench(turns: int, conversations: int, sources: list[str], work: Path) -> None:
    pg = EmbeddedPostgres(server_dir("bench-import-pg"), free_port(), durable=False)
    pg.start()
    nats_server = NatsServer(work / "nats", free_port())
    nats_server.start()
    try:
        with psycopg.connect(pg.url("postgres"), autocommit=True) as conn:
            conn.execute('CREATE DATABASE "bench_import"')
        url = pg.url("bench_import")
        apply_migrations(url)
        await register_org(nats_server.url, ORG, url)
        settings = Settings(org=ORG, database_url=SecretStr(url), nats_url=nats_server.url)
        service = await start_service("writes", routes, settings, embedder=MiniLM())
        try:
            print(f"{'format':<15} {'turns':>7} {'read s':>7} {'read t/s':>9} {'import s':>9} {'import t/s':>10} "
                  f"{'stored':>7} {'RSS read MiB':>12} {'RSS import MiB':>14}")
            for source in sources:
                home = work / f"home-{source}"
                repo = home / "repo"
                (repo / ".git").mkdir(parents=True)
                write_history(home, source, turns, conversations, repo)
                env = {**{k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")},
                       "HOME": str(home), "ECHO_MEMORY_HOME": str(home / "echo"),
                       "ECHO_MEMORY_NATS_URL": nats_server.url, "ECHO_MEMORY_ORG": ORG}
                read_s, read_kib, dry = await asyncio.to_thread(_child, env, work, "--dry-run", "--source", source)
                import_s, peak_kib, report = await asyncio.to_thread(_child, env, work, "--source", source)
                stored = sum(int(r["imported"]) for r in report)  # type: ignore[call-overload]
                assert int(dry[0]["turns"]) == turns, dry  # type: ignore[call-overload]
                print(f"{source:<15} {turns:>7} {read_s:>7.1f} {turns / read_s:>9.0f} {import_s:>9.1f} "
                      f"{stored / import_s:>10.1f} {stored:>7} {read_kib / 1024:>12.0f} {peak_kib / 1024:>14.0f}", flush=True)
                if source == "claude-code":
                    await _file_latency(env, work, home)
                shutil.rmtree(home, ignore_errors=True)
        finally:
            await service.stop()
    finally:
        nats_server.stop()
        pg.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50_000)
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--sources", default=",".join(SOURCE_NAMES), help="comma-separated formats")
    parser.add_argument("--read-only", action="store_true", help="only the read pass; start no system")
    args = parser.parse_args()
    sources = [s for s in args.sources.split(",") if s]
    unknown = set(sources) - set(SOURCE_NAMES)
    if unknown:
        raise SystemExit(f"unknown sources: {', '.join(sorted(unknown))}")
    work = Path(tempfile.mkdtemp(prefix="echo-import-bench-"))
    try:
        if args.read_only:
            read_only(args.turns, args.conversations, sources, work)
        else:
            asyncio.run(bench(args.turns, args.conversations, sources, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
