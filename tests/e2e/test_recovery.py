"""Crashes under `echo-memory up`, as a user meets them: real processes killed with -9, real MCP clients.

One data directory for the module; the tests run in file order: a stdio session across
`down`/`up`, then nats-server, Postgres and the supervisor itself killed, then a stop right
after Postgres and nats-server died. Each recovery time is printed (run with -s to see them).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import psutil
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from test_up import BIN, Running, _env, call, cli, start_quickstart, state, stop

from echo_memory.libs.testing import server_dir

pytestmark = pytest.mark.e2e

RECOVERY_SECONDS = 20.0


@dataclass
class System:
    """The data directory and the `quickstart` currently running on it (replaced across restarts)."""

    home: Path
    current: Running


@pytest.fixture(scope="module")
def system() -> Iterator[System]:
    home = server_dir("recovery")
    holder = System(home=home, current=start_quickstart(home))
    yield holder
    if holder.current.process.poll() is None:
        stop(holder.current)
    cli(home, "down")
    shutil.rmtree(home, ignore_errors=True)


def _write(text: str) -> dict:
    return {
        "session_id": "recovery",
        "entities": [{"name": "Supervisor", "type": "process"}, {"name": "Crash", "type": "event"}],
        "facts": [{"source": "Supervisor", "target": "Crash", "relation": "survives", "fact": text,
                   "confidence": "extracted"}],
    }


async def _write_until_it_succeeds(running: Running, text: str, within: float) -> float:
    """Seconds until a write through the HTTP edge succeeds; fails the test after `within`."""
    started = time.monotonic()
    last: object = None
    while time.monotonic() - started < within:
        try:
            result = await call(running.url, running.token, "write_episode", _write(text))
            if not result.is_error:
                return time.monotonic() - started
            last = result.structured_content
        except (httpx2.HTTPError, MCPError, OSError, ExceptionGroup) as exc:  # the edge refuses while the bus is down
            last = repr(exc)
        await asyncio.sleep(0.2)
    pytest.fail(f"no successful write within {within:.0f} s; last answer: {last}")


def _live(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def _in_data_directory(home: Path) -> list[int]:
    """Pids of processes working in the data directory (Postgres' postmaster and backends)."""
    found = []
    for process in psutil.process_iter(["cwd"]):
        cwd = process.info["cwd"] or ""
        if cwd.startswith(str(home)):
            found.append(process.pid)
    return found


def _all_pids(home: Path) -> list[int]:
    """The supervisor, every component it names, and every process in the data directory."""
    current = state(home)
    pids = {current["supervisor_pid"], *(c["pid"] for c in current["components"].values() if c["pid"])}
    return sorted(pids | set(_in_data_directory(home)))


def _restarted(home: Path, name: str, old_pid: int, within: float = RECOVERY_SECONDS) -> dict:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        component = state(home)["components"][name]
        if component["status"] == "running" and component["pid"] not in (None, old_pid):
            return component
        time.sleep(0.1)
    pytest.fail(f"{name} was not restarted: {state(home)['components'][name]}")


async def test_an_open_stdio_session_answers_again_after_down_and_up(system: System) -> None:
    running = system.current
    nats_before = state(system.home)["nats_url"]
    parameters = StdioServerParameters(command=str(BIN), args=["mcp"],
                                       env=_env(system.home, ECHO_MEMORY_TOKEN=running.token))
    async with Client(parameters) as client:
        first = await client.call_tool("query_memory", {"query": "what survives a crash?"})
        assert not first.is_error, first.content
        stopped = cli(system.home, "down")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        running.process.wait(timeout=60)
        system.current = start_quickstart(system.home)  # returns once the system is ready again
        ready = time.monotonic()
        assert state(system.home)["nats_url"] == nats_before  # NATS kept its port
        while True:
            answer = await client.call_tool("query_memory", {"query": "what survives a crash?"})
            if not answer.is_error:
                break
            assert answer.structured_content["error"]["retryable"] is True, answer.structured_content
            assert time.monotonic() - ready < 10, f"the stdio session still fails: {answer.structured_content}"
            await asyncio.sleep(0.2)
        print(f"\nstdio session answered {time.monotonic() - ready:.1f} s after `up` was ready again")


async def test_a_killed_nats_server_is_restarted_and_writes_succeed_again(system: System) -> None:
    before = state(system.home)["components"]["nats"]
    os.kill(before["pid"], signal.SIGKILL)
    elapsed = await _write_until_it_succeeds(system.current, "Writes resume after nats-server was killed.",
                                             within=RECOVERY_SECONDS)
    print(f"\nnats-server killed: a write succeeded again after {elapsed:.1f} s")
    after = _restarted(system.home, "nats", before["pid"])
    assert after["restarts"] == 1 and after["port"] == before["port"] and after["last_exit"] == -signal.SIGKILL
    status = cli(system.home, "status")
    assert status.returncode == 0, status.stdout
    assert re.search(rf"^nats\s+running\s+{after['pid']}\s+{after['port']}\s+1$", status.stdout, re.MULTILINE), status.stdout


async def test_a_killed_postgres_is_restarted_and_writes_succeed_again(system: System) -> None:
    before = state(system.home)["components"]["postgres"]
    os.kill(before["pid"], signal.SIGKILL)
    elapsed = await _write_until_it_succeeds(system.current, "Writes resume after Postgres was killed.",
                                             within=RECOVERY_SECONDS)
    print(f"\nPostgres killed: a write succeeded again after {elapsed:.1f} s")
    after = _restarted(system.home, "postgres", before["pid"])
    assert after["restarts"] >= 1 and after["port"] == before["port"]
    status = cli(system.home, "status")
    assert status.returncode == 0, status.stdout
    assert re.search(rf"^postgres\s+running\s+{after['pid']}\s+{after['port']}\s+{after['restarts']}$",
                     status.stdout, re.MULTILINE), status.stdout
    recalled = await call(system.current.url, system.current.token, "query_memory",
                          {"query": "what resumes after Postgres was killed?"})
    assert "Writes resume after Postgres was killed." in [r["text"] for r in recalled.structured_content["results"]]


def test_down_after_the_supervisor_was_killed_stops_everything_it_left(system: System) -> None:
    pids = _all_pids(system.home)
    os.kill(state(system.home)["supervisor_pid"], signal.SIGKILL)
    system.current.process.wait(timeout=10)
    assert len(_live(pids)) == len(pids) - 1  # only the supervisor died; its children run on
    started = time.monotonic()
    result = cli(system.home, "down")
    print(f"\nsupervisor killed: `down` cleaned up in {time.monotonic() - started:.1f} s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "was gone; stopped what it left running" in result.stdout, result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert not (system.home / "state.json").exists()
    assert _live(pids) == [] and _in_data_directory(system.home) == []


def test_stopping_right_after_postgres_and_nats_died_leaves_nothing_behind(system: System) -> None:
    system.current = start_quickstart(system.home)
    components = state(system.home)["components"]
    pids = _all_pids(system.home)
    # The signal `down` sends, right after the kills: the supervisor stops with both already dead.
    os.kill(components["postgres"]["pid"], signal.SIGKILL)
    os.kill(components["nats"]["pid"], signal.SIGKILL)
    os.kill(state(system.home)["supervisor_pid"], signal.SIGTERM)
    output, _ = system.current.process.communicate(timeout=60)
    assert system.current.process.returncode == 0, output
    assert "Traceback" not in output, output
    assert not (system.home / "state.json").exists()
    assert _live(pids) == [] and _in_data_directory(system.home) == []
    result = cli(system.home, "down")
    assert result.returncode == 0 and "nothing is running" in result.stdout, result.stdout + result.stderr
