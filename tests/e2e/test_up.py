"""The system as a user starts it: real `echo-memory quickstart` processes, a real MCP client over HTTP.

One module-scoped system (start-up costs a few seconds); the tests run in file order and the
last ones stop it and start it again on the same data directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from echo_memory.libs.local.stack import tool_error
from echo_memory.libs.testing import mcp_http_client, server_dir

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent / "echo-memory"


@dataclass
class Running:
    home: Path
    process: subprocess.Popen[str]
    url: str
    token: str
    output: list[str]


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")}
    env.update(ECHO_MEMORY_HOME=str(home), **extra)
    return env


def start_quickstart(home: Path, timeout: float = 120) -> Running:
    process = subprocess.Popen(
        [str(BIN), "quickstart"], env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    output: list[str] = []
    deadline = time.monotonic() + timeout
    url = token = None
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        output.append(line)
        match = re.search(
            r"claude mcp add --scope user --transport http echo-memory (\S+) --header \"Authorization: Bearer (\S+)\"", line
        )
        if match:
            url, token = match.group(1), match.group(2)
            break
    assert url and token, "".join(output)
    return Running(home=home, process=process, url=url, token=token, output=output)


def stop(running: Running) -> int:
    """Send what Ctrl-C sends; returns the exit code (the remaining output lands in running.output)."""
    running.process.send_signal(signal.SIGINT)
    rest, _ = running.process.communicate(timeout=60)
    running.output.append(rest)
    return running.process.returncode


def cli(home: Path, *args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN), *args], env=_env(home, **env), capture_output=True, text=True, timeout=timeout)


def _dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def call(url: str, token: str, tool: str, arguments: dict) -> object:
    async with mcp_http_client(url, token) as client:
        return await client.call_tool(tool, arguments)


@pytest.fixture(scope="module")
def system() -> Iterator[Running]:
    home = server_dir("home")
    running = start_quickstart(home)
    yield running
    if running.process.poll() is None:
        stop(running)
    shutil.rmtree(home, ignore_errors=True)


WRITE = {
    "session_id": "e2e",
    "entities": [{"name": "Release train", "type": "process"}, {"name": "Thursday", "type": "time"}],
    "facts": [{"source": "Release train", "target": "Thursday", "relation": "ships on",
               "fact": "The release train ships every Thursday afternoon.", "confidence": "extracted"}],
}


def state(home: Path) -> dict:
    return json.loads((home / "state.json").read_text())


async def test_quickstart_prints_a_working_client_line_and_memory_round_trips(system: Running) -> None:
    assert system.url.startswith("http://127.0.0.1:") and system.url.endswith("/mcp")
    written = await call(system.url, system.token, "write_episode", WRITE)
    assert not written.is_error, written.content
    recalled = await call(system.url, system.token, "query_memory", {"query": "when do we ship releases?"})
    assert not recalled.is_error
    assert recalled.structured_content["results"][0]["text"] == WRITE["facts"][0]["fact"]


def test_status_tells_the_truth_about_every_component(system: Running) -> None:
    result = cli(system.home, "status")
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("postgres", "nats", "writes", "retrieval", "causal", "audit", "reindex", "consolidation", "edge"):
        assert re.search(rf"^{name}\s+running\s+\d+", result.stdout, re.M), result.stdout
    assert "schema version: 1" in result.stdout or re.search(r"schema version: \d+", result.stdout)
    assert re.search(r"scope shared: 1 active facts", result.stdout), result.stdout
    assert re.search(r"^  claude-code\s+1 active\s+1 in history, last write ", result.stdout, re.M), result.stdout


SERVICE_NAMES = ("writes", "retrieval", "causal", "audit", "reindex", "consolidation")


def test_every_service_runs_in_one_process_beside_the_edge_each_as_itself(system: Running) -> None:
    components = state(system.home)["components"]
    (pid,) = {components[name]["pid"] for name in SERVICE_NAMES}
    assert components["edge"]["pid"] != pid
    assert psutil.Process(pid).cmdline()[-7:] == ["service", *SERVICE_NAMES]
    log = (system.home / "logs" / "services.log").read_text()
    assert all(f"echo-memory {name}: ready" in log for name in SERVICE_NAMES), log[-2000:]
    # Each hosted service has its own bus user: a retrieval subscribed as the writes user would have been refused.
    nats_log = (system.home / "nats" / "nats.log").read_text()
    assert "Violation" not in nats_log and "authentication error" not in nats_log.lower(), nats_log[-2000:]


def test_one_scrape_url_serves_every_service_and_health_reads_the_store(system: Running) -> None:
    # Each service answers scrapes on its own bus connection: their metrics reach the edge's /metrics.
    import httpx2
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx2.get(system.url.rsplit("/mcp", 1)[0] + "/metrics", timeout=30).text
    up = {s.labels["service"]: s.value for f in text_string_to_metric_families(text) for s in f.samples
          if s.name == "echo_metrics_service_up"}
    assert up == dict.fromkeys(("writes", "retrieval", "causal", "audit", "reindex", "consolidation"), 1.0)
    assert re.search(r'^echo_verb_duration_seconds_count\{.*service="writes".*verb="write_episode".*\} [1-9]', text, re.M)
    result = cli(system.home, "health", "--json")
    assert result.returncode == 0, result.stderr
    health = json.loads(result.stdout)
    assert health["figures"]["facts"] == 1 and [w["agent_id"] for w in health["figures"]["writers"]] == ["claude-code"]
    assert health["score"] == round(sum(c["points"] for c in health["checks"]))


def test_services_and_edge_run_on_uvloop(system: Running) -> None:
    # libs/server/eventloop.py: every process's loop is uvloop's where it is installed (it is, here).
    status = cli(system.home, "status").stdout
    pids = {name: int(pid) for name, pid in re.findall(r"^(\w+)\s+running\s+(\d+)", status, re.M)}
    for name in ("writes", "retrieval", "edge"):
        libraries = {m.path for m in psutil.Process(pids[name]).memory_maps()}
        assert any("/uvloop/" in path for path in libraries), f"{name} has not loaded uvloop"


def test_a_second_instance_on_the_same_data_directory_is_refused_in_one_sentence(system: Running) -> None:
    result = cli(system.home, "up")
    assert result.returncode != 0
    assert "already running with data directory" in result.stderr
    assert "Traceback" not in result.stderr


async def test_a_killed_service_gives_a_retryable_error_then_is_restarted(system: Running) -> None:
    pid = state(system.home)["components"]["retrieval"]["pid"]
    # The session is opened before the kill, so the call reaches the bus while the service is down:
    # opened after it, on a loaded machine, the handshake could outlast the restart and the call succeed.
    async with mcp_http_client(system.url, system.token) as client:
        os.kill(pid, signal.SIGKILL)
        started = time.monotonic()
        # Dead (gone or a zombie) before the call, so its bus connection is closed; the restart
        # waits out a 0.5 s back-off and then loads the services.
        while not _dead(pid) and time.monotonic() - started < 2:
            time.sleep(0.01)
        result = await client.call_tool("query_memory", {"query": "release day"})
    assert result.is_error, result
    assert tool_error(result)["retryable"] is True
    assert time.monotonic() - started < 6.5
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        component = state(system.home)["components"]["retrieval"]
        if component["restarts"] >= 1 and component["status"] == "running" and component["pid"] != pid:
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"retrieval was not restarted: {state(system.home)['components']['retrieval']}")
    status = cli(system.home, "status").stdout
    assert re.search(r"^retrieval\s+running\s+\d+\s+-\s+1$", status, re.M), status
    for _ in range(100):  # the new process needs a moment to load the model and subscribe
        result = await call(system.url, system.token, "query_memory", {"query": "release day"})
        if not result.is_error:
            break
        time.sleep(0.2)
    assert not result.is_error


async def test_ctrl_c_stops_everything_and_a_restart_finds_the_same_data(system: Running) -> None:
    pids = [c["pid"] for c in state(system.home)["components"].values() if c["pid"]]
    assert stop(system) == 0, "".join(system.output)
    assert not (system.home / "state.json").exists()
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert cli(system.home, "status").returncode == 1

    again = start_quickstart(system.home)
    try:
        assert again.url == system.url  # the client line printed the first time still points at the edge
        recalled = await call(again.url, again.token, "query_memory", {"query": "when do we ship releases?"})
        assert recalled.structured_content["results"][0]["text"] == WRITE["facts"][0]["fact"]
        old = await call(again.url, system.token, "query_memory", {"query": "x"})  # tokens survive restarts too
        assert not old.is_error
    finally:
        assert stop(again) == 0


def test_a_configured_port_in_use_is_one_clear_sentence(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [str(BIN), "up"], env=_env(tmp_path, ECHO_MEMORY_EDGE_PORT=str(port)),
            capture_output=True, text=True, timeout=60,
        )
    assert result.returncode != 0
    assert f"port {port} for the MCP edge is already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_detach_with_a_process_per_service_runs_in_the_background_and_down_stops_it() -> None:
    home = server_dir("detach")
    try:
        started = cli(home, "up", "--detach", timeout=180, ECHO_MEMORY_SERVICES_IN_ONE_PROCESS="0")
        assert started.returncode == 0, started.stdout + started.stderr
        assert "running in the background" in started.stdout
        supervisor = state(home)["supervisor_pid"]
        assert psutil.pid_exists(supervisor)
        pids = [state(home)["components"][name]["pid"] for name in (*SERVICE_NAMES, "edge")]
        assert len(set(pids)) == len(pids)
        assert cli(home, "status").returncode == 0
        stopped = cli(home, "down")
        assert stopped.returncode == 0 and "stopped" in stopped.stdout
        assert not (home / "state.json").exists()
        assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        assert cli(home, "status").returncode == 1
    finally:
        cli(home, "down")
        shutil.rmtree(home, ignore_errors=True)
