"""Chaos under a write load: the system as a user starts it, kill -9 of writes, edge, nats-server, Postgres.

Clients write through the real MCP HTTP edge, each write with its own idempotency key, retrying
the same key until it is acknowledged. Every failed call must be a typed retryable tool error, or
a transport error (connection refused or dropped, HTTP 5xx, or 401 while the token cannot be
checked) around the component being down. At the end every acknowledged write is in Postgres
exactly once, and the system came back with nobody touching it. Run with -s for the figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import nats
import nats.errors
import psycopg
import pytest
from mcp.shared.exceptions import MCPError
from test_up import Running, cli, start_quickstart, state, stop

from echo_memory.libs.local.stack import tool_error
from echo_memory.libs.local.supervisor.postgres import EmbeddedPostgres
from echo_memory.libs.testing import mcp_http_client, server_dir

pytestmark = pytest.mark.e2e

WORKERS = 3
STEADY_SECONDS = 2.0  # load before each kill, and after the last recovery
# A restarted writes service loads the embedding model, the edge its imports: on a loaded 2-core
# machine either took most of a minute (libs/local/supervisor/supervisor.py EDGE_START_TIMEOUT).
RECOVERY_BOUND = 120.0
CALL_BOUND = 30.0
VICTIMS = ("writes", "edge", "nats", "postgres")


@dataclass
class Load:
    acked: dict[str, str] = field(default_factory=dict)  # idempotency key -> fact text
    failures: Counter[str] = field(default_factory=Counter)
    untyped: list[str] = field(default_factory=list)  # failures that are neither typed-retryable nor transport
    successes: list[float] = field(default_factory=list)  # monotonic start time of every acknowledged call
    samples: dict[str, str] = field(default_factory=dict)  # one example of each failure kind
    stop: bool = False


@pytest.fixture(scope="module")
def system() -> Iterator[Running]:
    home = server_dir("chaos")
    running = start_quickstart(home)
    yield running
    if running.process.poll() is None:
        stop(running)
    cli(home, "down")
    shutil.rmtree(home, ignore_errors=True)


def _episode(text: str, key: str) -> dict:
    return {
        "session_id": "chaos",
        "idempotency_key": key,
        "entities": [{"name": "Chaos monkey", "type": "process"}, {"name": "Write path", "type": "component"}],
        "facts": [{"source": "Chaos monkey", "target": "Write path", "relation": "tested",
                   "fact": text, "confidence": "extracted"}],
    }


def _transport(exc: BaseException) -> str | None:
    """The kind of a transport failure, or None when `exc` is something else."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, httpx2.HTTPStatusError):
        status = exc.response.status_code
        return f"http_{status}" if status >= 500 or status in (401, 429) else None
    if isinstance(exc, (httpx2.TransportError, ConnectionError, OSError, TimeoutError)):
        return "transport"
    if isinstance(exc, MCPError):
        return "transport_mcp"
    return None


async def _write_once(running: Running, load: Load, key: str, text: str) -> bool:
    started = time.monotonic()
    try:
        async with asyncio.timeout(CALL_BOUND):
            async with mcp_http_client(running.url, running.token) as client:
                result = await client.call_tool("write_episode", _episode(text, key))
    except BaseException as exc:  # noqa: BLE001 - classified, and anything unexpected fails the test
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        kind = _transport(exc)
        load.failures[kind or "unexpected"] += 1
        load.samples.setdefault(kind or "unexpected", repr(exc)[:400])
        if kind is None:
            load.untyped.append(repr(exc)[:300])
        return False
    if not result.is_error:
        outcome = result.structured_content
        if outcome.get("stored") is True or outcome.get("not_stored") == "unchanged":
            load.successes.append(started)
            return True
        load.untyped.append(f"success-shaped but not stored: {outcome}")
        return False
    error = tool_error(result)
    load.failures[error["code"]] += 1
    if not error["retryable"]:
        load.untyped.append(f"not retryable: {error}")
    return False


async def _worker(running: Running, load: Load, worker: int) -> None:
    n = 0
    while not load.stop:
        n += 1
        key, text = f"chaos-{worker}-{n}", f"Chaos write {worker}-{n} reached the store."
        while not await _write_once(running, load, key, text):  # the same key until acknowledged
            await asyncio.sleep(0.2)
        load.acked[key] = text


def _tail(home: Path, name: str) -> str:
    path = Path(state(home)["components"][name]["log"] or "")
    return path.read_text(errors="replace")[-1500:] if path.is_file() else "(no log)"


def _refused_without_credentials(url: str) -> bool:
    async def attempt() -> bool:
        try:
            connection = await nats.connect(url, allow_reconnect=False, connect_timeout=3)
        except nats.errors.Error as exc:
            return "authorization" in str(exc).lower()
        await connection.close()
        return False

    return asyncio.run(attempt())


def test_up_runs_the_bus_authenticated(system: Running) -> None:
    home = system.home
    assert _refused_without_credentials(state(home)["nats_url"])
    files = sorted((home / "run").glob("nats-*.json"))
    assert {f.name for f in files} >= {"nats-admin.json", "nats-edge.json", "nats-writes.json"}
    for path in [*files, home / "nats" / "nats.conf"]:
        assert path.stat().st_mode & 0o777 == 0o600, path
    assert json.loads((home / "run" / "nats-edge.json").read_text())["user"] == "edge"
    status = cli(home, "status")  # the CLI finds the admin credentials by itself
    assert status.returncode == 0, status.stdout + status.stderr


async def test_kill_each_component_under_load_and_lose_nothing(system: Running) -> None:
    load = Load()
    workers = [asyncio.create_task(_worker(system, load, w)) for w in range(WORKERS)]
    recovery: dict[str, float] = {}
    began = time.monotonic()
    try:
        await asyncio.sleep(STEADY_SECONDS)
        for victim in VICTIMS:
            pid = state(system.home)["components"][victim]["pid"]
            os.kill(pid, signal.SIGKILL)
            killed = time.monotonic()
            while not any(t > killed for t in load.successes):
                assert time.monotonic() - killed < RECOVERY_BOUND, (
                    f"no acknowledged write {RECOVERY_BOUND:.0f} s after killing {victim}; {load.failures} "
                    f"{load.samples}; {state(system.home)['components'][victim]}; log: {_tail(system.home, victim)}")
                assert all(not w.done() for w in workers), [w.exception() for w in workers if w.done()]
                await asyncio.sleep(0.05)
            recovery[victim] = min(t for t in load.successes if t > killed) - killed
            component = state(system.home)["components"][victim]
            assert component["pid"] != pid and component["status"] == "running", component
        await asyncio.sleep(STEADY_SECONDS)
    finally:
        load.stop = True
        await asyncio.wait_for(asyncio.gather(*workers, return_exceptions=True), timeout=CALL_BOUND * 3)
    elapsed = time.monotonic() - began

    assert load.untyped == [], load.untyped[:10]
    url = EmbeddedPostgres(system.home / "postgres", state(system.home)["pg_port"]).url()
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT text, count(*) FROM facts WHERE text LIKE 'Chaos write %%' GROUP BY text").fetchall()
        keys = conn.execute("SELECT count(*) FROM idempotency WHERE key LIKE 'chaos-%%'").fetchone()
    stored = dict(rows)
    missing = [t for t in load.acked.values() if t not in stored]
    doubled = {t: c for t, c in stored.items() if c != 1}
    assert missing == [] and doubled == {}, (missing[:5], doubled)
    print(f"\nchaos: {len(load.acked)} acknowledged writes in {elapsed:.1f} s, all stored exactly once "
          f"({len(stored)} chaos facts in Postgres, {keys[0] if keys else '?'} idempotency rows); "
          f"failed calls by code: {dict(load.failures)}; "
          "recovery (kill -9 to the next acknowledged write): "
          + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in recovery.items()))
