"""Export and import time and file size of a synthetic store, over a real bus and Postgres.

    python lab/backup_bench.py --facts 10000

Starts a throw-away embedded Postgres and nats-server, COPYs a synthetic store of `--facts`
facts (a tenth of them with a second version, plus entities, episodes, reads, saves and audit
rows: libs/testing/backup_store.py) into one org, runs the audit service, exports the whole org
to a file with the CLI's functions, imports the file into an empty second org, and checks the two
databases hold the same rows. Prints one line of figures per phase. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from pydantic import SecretStr

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.audit import EXPORT_PAGE_BYTES
from echo_memory.libs.local.backup import export_to, import_lines, read_export_file
from echo_memory.libs.local.cli.audit_commands import admin_session
from echo_memory.libs.local.supervisor.nats import NatsServer
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.local.supervisor.postgres import EmbeddedPostgres
from echo_memory.libs.server.orgs import register_org
from echo_memory.libs.server.service.runner import start_service
from echo_memory.libs.server.store.schema import apply_migrations
from echo_memory.libs.testing import server_dir
from echo_memory.libs.testing.backup_store import StoreSize, build_store, table_checksums
from echo_memory.services.audit.app import routes

SOURCE, TARGET = "bench-source", "bench-target"


async def bench(facts: int, page_bytes: int, work: Path) -> None:
    pg = EmbeddedPostgres(server_dir("bench-pg"), free_port(), durable=False)
    pg.start()
    nats_server = NatsServer(work / "nats", free_port())
    nats_server.start()
    try:
        # The target is a clone of the migrated, empty source, so even `shared` has the same id and
        # the import keeps every id (as a restore into an org made from the same template does).
        names = {org: org.replace("-", "_") for org in (SOURCE, TARGET)}
        with psycopg.connect(pg.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{names[SOURCE]}"')
        apply_migrations(pg.url(names[SOURCE]))
        with psycopg.connect(pg.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{names[TARGET]}" TEMPLATE "{names[SOURCE]}"')
        urls = {org: pg.url(name) for org, name in names.items()}
        for org, url in urls.items():
            await register_org(nats_server.url, org, url)
        started = time.monotonic()
        written = await build_store(urls[SOURCE], StoreSize(facts=facts, superseded=facts // 10, reads=facts // 20))
        print(f"store     {sum(written.values())} rows ({written['facts']} facts) in {time.monotonic() - started:.1f} s")
        settings = Settings(org=SOURCE, database_url=SecretStr(urls[SOURCE]), nats_url=nats_server.url)
        service = await start_service("audit", routes, settings)
        try:
            file = work / "org.jsonl"
            started = time.monotonic()
            async with admin_session(settings) as call:
                with file.open("w", encoding="utf-8") as handle:
                    counts = await export_to(call, handle, scope=None, progress=None, timeout=600,
                                             page_bytes=page_bytes)
            took = time.monotonic() - started
            size = file.stat().st_size
            print(f"export    {sum(counts.values())} records, {size / 2**20:.1f} MiB in {took:.1f} s "
                  f"({size / 2**20 / took:.1f} MiB/s)")
            started = time.monotonic()
            lines = read_export_file(file)
            checked = time.monotonic() - started
            spent: dict[str, float] = {}
            async with admin_session(Settings(org=TARGET, nats_url=nats_server.url)) as call:

                async def timed(service: str, verb: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
                    begun = time.monotonic()
                    try:
                        return await call(service, verb, args, timeout)
                    finally:
                        spent[verb] = spent.get(verb, 0.0) + time.monotonic() - begun

                await import_lines(timed, lines, scope=None, progress=None, timeout=1800, chunk_bytes=page_bytes)
            took = time.monotonic() - started
            print(f"import    {len(lines)} lines in {took:.1f} s (file read and checked {checked:.1f} s, "
                  f"staging {spent['import_stage']:.1f} s, restore {spent['import']:.1f} s)")
            same = table_checksums(urls[SOURCE]) == table_checksums(urls[TARGET])
            print(f"checksums {'equal' if same else 'DIFFER'} in every exported table")
        finally:
            await service.stop()
    finally:
        nats_server.stop()
        pg.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--page-bytes", type=int, default=EXPORT_PAGE_BYTES)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="echo-backup-bench-"))
    try:
        asyncio.run(bench(args.facts, args.page_bytes, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
