"""The client line keeps working: a taken edge port is said on the terminal with the new line, the
next start returns to the remembered port, and `echo-memory line` prints the current line.

The first tests need no running system (real sockets, the real supervisor's port choice); the
last one starts the real system twice with `up --detach` / `quickstart --detach`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from echo_memory.libs.core.config import Settings
from echo_memory.libs.local.cli.main import main
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.local.supervisor.supervisor import EDGE_PORT_FILE, NATS_PORT_FILE, PG_PORT_FILE, Supervisor
from echo_memory.libs.testing import server_dir

BIN = Path(sys.executable).parent / "echo-memory"
LINE = re.compile(r'claude mcp add --scope user --transport http echo-memory (\S+) --header "Authorization: Bearer (\S+)"')


@contextmanager
def occupied() -> Iterator[int]:
    """A port something listens on, as another program holding the edge's old port."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield int(busy.getsockname()[1])


@contextmanager
def occupied_at(port: int) -> Iterator[None]:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        yield


def client_line(output: str) -> tuple[str, str]:
    """(URL, token) of the `claude mcp add` line in `output`; fails the test when there is none."""
    match = LINE.search(output)
    assert match, output
    return match.group(1), match.group(2)


def test_a_taken_remembered_edge_port_stays_remembered_and_is_announced(tmp_path: Path) -> None:
    with occupied() as taken:
        (tmp_path / EDGE_PORT_FILE).write_text(f"{taken}\n")
        supervisor = Supervisor(Settings(home=tmp_path, edge_port=0, pg_port=0, nats_port=0))
        edge, pg, nats = supervisor._choose_ports()
    assert edge != taken
    # The file still names the port clients were given, so the next start goes back to it.
    assert (tmp_path / EDGE_PORT_FILE).read_text().strip() == str(taken)
    assert (tmp_path / PG_PORT_FILE).read_text().strip() == str(pg)
    assert (tmp_path / NATS_PORT_FILE).read_text().strip() == str(nats)
    assert supervisor._edge_moved_from == taken
    assert any(f"port {taken} of the last run is in use" in n and f"moves to {edge}" in n for n in supervisor._notices)
    # Once it is free, the next choice returns to it.
    again = Supervisor(Settings(home=tmp_path, edge_port=0, pg_port=0, nats_port=0))
    assert again._choose_ports()[0] == taken
    assert again._edge_moved_from is None and again._notices == []


def test_line_with_nothing_running_is_one_sentence_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ECHO_MEMORY_HOME", str(tmp_path))
    assert main(["line"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "not running" in lines[0] and "echo-memory up" in lines[0], captured.err


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")}
    env["ECHO_MEMORY_HOME"] = str(home)
    return env


def cli(home: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN), *args], env=_env(home), capture_output=True, text=True, timeout=timeout)


@pytest.mark.e2e
def test_a_taken_edge_port_is_said_on_the_terminal_and_the_next_start_returns() -> None:
    home = server_dir("line")
    remembered = free_port()
    home.mkdir(parents=True, exist_ok=True)
    (home / EDGE_PORT_FILE).write_text(f"{remembered}\n")
    try:
        with occupied_at(remembered):
            started = cli(home, "quickstart", "--detach")
            assert started.returncode == 0, started.stdout + started.stderr
            assert f"port {remembered} of the last run is in use" in started.stdout
            url, token = client_line(started.stdout)
            assert url != f"http://127.0.0.1:{remembered}/mcp"
            assert url == json.loads((home / "state.json").read_text())["edge_url"]
            assert "claude mcp remove echo-memory --scope user" in started.stdout
            # `line` prints the same, current line at any time.
            printed = cli(home, "line", timeout=60)
            assert printed.returncode == 0, printed.stderr
            assert client_line(printed.stdout) == (url, token)
            assert cli(home, "down", timeout=90).returncode == 0
        # The other program let go: the next start (plain `up --detach`) is back on the remembered port.
        restarted = cli(home, "up", "--detach")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        assert f"MCP at http://127.0.0.1:{remembered}/mcp" in restarted.stdout
        assert "in use" not in restarted.stdout and not LINE.search(restarted.stdout)
        again = cli(home, "line", timeout=60)
        assert again.returncode == 0, again.stderr
        assert client_line(again.stdout) == (f"http://127.0.0.1:{remembered}/mcp", token)
        assert cli(home, "down", timeout=90).returncode == 0
        gone = cli(home, "line", timeout=60)
        assert gone.returncode == 1 and "not running" in gone.stderr and "Traceback" not in gone.stderr
    finally:
        cli(home, "down", timeout=90)
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.e2e
def test_foreground_up_says_the_port_moved_and_prints_the_new_line() -> None:
    home = server_dir("line-up")
    remembered = free_port()
    home.mkdir(parents=True, exist_ok=True)
    (home / EDGE_PORT_FILE).write_text(f"{remembered}\n")
    try:
        with occupied_at(remembered):
            process = subprocess.Popen([str(BIN), "up"], env=_env(home), stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
            text = _interrupt_once(process, lambda out: LINE.search(out) is not None)
        url, _ = client_line(text)
        assert f"port {remembered} of the last run is in use" in text
        assert url != f"http://127.0.0.1:{remembered}/mcp" and f"MCP at {url}" in text
        assert process.returncode == 0, text
    finally:
        cli(home, "down", timeout=90)
        shutil.rmtree(home, ignore_errors=True)


def _interrupt_once(process: subprocess.Popen[str], seen: Callable[[str], bool]) -> str:
    """Read `process`'s output until `seen` holds (or it ends, or 240 s pass), send one SIGINT, and
    return everything it printed once it exited (TimeoutExpired after 90 s)."""
    assert process.stdout is not None
    output: list[str] = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not seen("".join(output)):
        line = process.stdout.readline()
        if not line:
            break
        output.append(line)
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=90)
    return "".join(output) + rest


@pytest.mark.e2e
def test_ctrl_c_while_the_start_up_lines_print_stops_everything() -> None:
    # The signal lands while quickstart issues its token and prints the line, before the
    # supervisor's own handler is in place: the system must still stop, and exit as after Ctrl-C.
    home = server_dir("line-ctrl-c")
    try:
        process = subprocess.Popen([str(BIN), "quickstart"], env=_env(home), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        text = _interrupt_once(process, lambda out: "echo-memory: ready" in out)
        assert "echo-memory: ready" in text and "echo-memory: stopped" in text, text
        assert process.returncode == 0, text
        state = json.loads((home / "state.json").read_text()) if (home / "state.json").exists() else None
        assert state is None or not state.get("ready"), state
    finally:
        cli(home, "down", timeout=90)
        shutil.rmtree(home, ignore_errors=True)
