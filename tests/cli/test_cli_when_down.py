"""The real `echo-memory` CLI with nothing running: each command ends quickly in one sentence.

NATS and Postgres URLs point at closed ports (or at a socket that accepts and never speaks), so
every command meets the condition a user meets when the system is down.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest

from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.local.supervisor.state import State, write_state

REPO = Path(__file__).resolve().parents[2]
CLI = "import sys; from echo_memory.libs.local.cli.main import main; sys.exit(main())"
BOUND_SECONDS = 15.0
DOWN_HINT = "echo-memory up"


def _env(home: Path, *, nats_url: str | None, database_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")}
    env["ECHO_MEMORY_HOME"] = str(home)
    if nats_url is not None:
        env["ECHO_MEMORY_NATS_URL"] = nats_url
    if database_url is not None:
        env["ECHO_MEMORY_DATABASE_URL"] = database_url
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "operator"), env.get("PYTHONPATH", "")])
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    # A hang ends in TimeoutExpired (a failure) a little past the bound rather than stalling the suite.
    done = subprocess.run([sys.executable, "-c", CLI, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=BOUND_SECONDS + 5)
    return done, time.monotonic() - started


def _assert_one_sentence(done: subprocess.CompletedProcess[str], took: float) -> None:
    assert took < BOUND_SECONDS, f"took {took:.1f} s"
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert DOWN_HINT in lines[0] or "database" in lines[0], lines[0]


@pytest.fixture
def closed_port_urls() -> tuple[str, str]:
    """(NATS URL, database URL), each at a port nothing listens on."""
    return f"nats://127.0.0.1:{free_port()}", f"postgresql://echo:not-a-password@127.0.0.1:{free_port()}/echo"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "CLAUDE.md").write_text("# notes\nThe build uses make.\n")
    return folder


BUS_COMMANDS = [
    ["token", "create", "--agent", "someone"],
    ["token", "list"],
    ["scope", "create", "team"],
    ["recall", "what does the build use?"],
    ["reindex"],
    ["reindex", "--status"],
    ["export"],
    ["why", "00000000-0000-0000-0000-000000000000"],
    ["docs", "sync", "PROJECT"],
    ["eval"],
    ["demo-seed", "--remove"],
]


@pytest.mark.parametrize("args", BUS_COMMANDS, ids=[" ".join(a) for a in BUS_COMMANDS])
def test_a_bus_command_with_nats_down_says_so_in_one_sentence(
    tmp_path: Path, closed_port_urls: tuple[str, str], project: Path, args: list[str]
) -> None:
    nats_url, database_url = closed_port_urls
    env = _env(tmp_path / "home", nats_url=nats_url, database_url=database_url)
    done, took = _run([str(project) if a == "PROJECT" else a for a in args], env, tmp_path)
    _assert_one_sentence(done, took)
    assert "message bus (NATS)" in done.stderr and DOWN_HINT in done.stderr


@pytest.mark.parametrize("args", [["recall", "anything"], ["reindex"], ["export"], ["token", "list"]],
                         ids=["recall", "reindex", "export", "token list"])
def test_a_bus_command_with_no_system_configured_says_to_start_it(
    tmp_path: Path, closed_port_urls: tuple[str, str], args: list[str]
) -> None:
    _, database_url = closed_port_urls
    env = _env(tmp_path / "home", nats_url=None, database_url=database_url)
    done, took = _run(args, env, tmp_path)
    _assert_one_sentence(done, took)
    assert "is not running" in done.stderr


def test_init_db_against_an_unreachable_database_names_it_in_one_sentence(
    tmp_path: Path, closed_port_urls: tuple[str, str]
) -> None:
    nats_url, database_url = closed_port_urls
    env = _env(tmp_path / "home", nats_url=nats_url, database_url=database_url)
    done, took = _run(["init-db"], env, tmp_path)
    _assert_one_sentence(done, took)
    port = database_url.rsplit(":", 1)[1].split("/")[0]
    assert f"127.0.0.1:{port}" in done.stderr
    assert "not-a-password" not in done.stderr


def _live_state(home: Path, nats_url: str) -> None:
    # The test process stands in for a live supervisor, so `status` goes on to ask the bus.
    home.mkdir(parents=True, exist_ok=True)
    write_state(home, State(supervisor_pid=os.getpid(), home=str(home), org="local",
                            started_at=datetime.now(tz=UTC), ready=True, nats_url=nats_url))


def test_status_with_a_supervisor_but_nats_down_ends_and_names_the_bus(
    tmp_path: Path, closed_port_urls: tuple[str, str]
) -> None:
    nats_url, database_url = closed_port_urls
    home = tmp_path / "home"
    _live_state(home, nats_url)
    done, took = _run(["status"], _env(home, nats_url=None, database_url=database_url), tmp_path)
    assert took < BOUND_SECONDS, f"took {took:.1f} s"
    assert done.returncode == 1
    assert "Traceback" not in done.stderr, done.stderr
    assert "message bus (NATS)" in done.stdout and DOWN_HINT in done.stdout


@pytest.fixture
def silent_listener() -> Iterator[socket.socket]:
    """A listening socket that accepts TCP connections and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener


def _url(listener: socket.socket) -> str:
    return f"nats://127.0.0.1:{listener.getsockname()[1]}"


def test_a_server_that_never_speaks_nats_is_given_up_on_within_the_bound(
    tmp_path: Path, silent_listener: socket.socket, closed_port_urls: tuple[str, str]
) -> None:
    env = _env(tmp_path / "home", nats_url=_url(silent_listener), database_url=closed_port_urls[1])
    done, took = _run(["token", "list"], env, tmp_path)
    _assert_one_sentence(done, took)
    assert "message bus (NATS)" in done.stderr


def test_ctrl_c_while_connecting_exits_130_without_a_traceback(
    tmp_path: Path, silent_listener: socket.socket, closed_port_urls: tuple[str, str]
) -> None:
    env = _env(tmp_path / "home", nats_url=_url(silent_listener), database_url=closed_port_urls[1])
    # The CLI starts with SIGINT at its default, as under a terminal: an ignored SIGINT would be
    # inherited from whatever started this test run and make Ctrl-C a no-op.
    proc = subprocess.Popen([sys.executable, "-c", CLI, "export"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    silent_listener.settimeout(30)
    port = silent_listener.getsockname()[1]
    accepted, _ = silent_listener.accept()
    with accepted:
        # Interrupt only once this CLI process holds the connection: a connection from another
        # process, or a signal before the CLI reached its connect, would test something else.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(
            c.raddr and c.raddr.port == port for c in psutil.Process(proc.pid).net_connections(kind="tcp")
        ):
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err


def test_status_into_a_pipe_whose_reader_left_ends_quietly(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to stdout now fails with EPIPE, as after `| head -1` exits
    try:
        done = subprocess.run([sys.executable, "-c", CLI, "status"], env=_env(tmp_path / "home", nats_url=None,
                              database_url=None), cwd=tmp_path, stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=60)
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 141


def test_status_piped_into_head_prints_its_first_line_and_no_traceback(tmp_path: Path) -> None:
    env = _env(tmp_path / "home", nats_url=None, database_url=None)
    command = f"{sys.executable} -c '{CLI}' status | head -1"
    done = subprocess.run(["bash", "-c", command], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.startswith("data directory:")
    assert done.stdout.count("\n") == 1
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
