"""`echo-memory up`: start Postgres, NATS and every service; restart what dies; stop it all cleanly.

Children are separate processes (`echo-memory service NAME`), each logging to
`<home>/logs/<name>.log`. A child that exits is restarted with exponential back-off (0.5 s
doubling to 30 s; reset after a minute of health) and the restart is logged and counted in
state.json, which `echo-memory status` reads.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from libs import eventloop
from libs.config import Settings
from libs.orgs import register_org
from libs.service.registry import NAMES
from libs.store.schema import apply_migrations
from libs.supervisor.nats import NatsServer
from libs.supervisor.ports import free_port, port_in_use, wait_for_port
from libs.supervisor.postgres import EmbeddedPostgres
from libs.supervisor.state import Component, State, state_path, write_state

BACKOFF_START = 0.5
BACKOFF_MAX = 30.0
HEALTHY_AFTER = 60.0
LOCK_FILE = "supervisor.lock"
# The edge's last port (when none is configured): reused while free, so the client line
# `quickstart` printed once keeps working after a restart.
EDGE_PORT_FILE = "edge-port"


class StartupError(RuntimeError):
    """One clear sentence for the user; `up` prints it and exits non-zero."""


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    restarts: int = 0
    backoff: float = BACKOFF_START
    next_start: float = 0.0
    started_at: float = 0.0
    last_exit: int | None = None
    port: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    log_offset: int = 0  # where this run's output starts in the (appended) log file


def acquire_lock(home: Path) -> IO[str]:
    """Hold the data directory for this process, or explain who holds it."""
    home.mkdir(parents=True, exist_ok=True)
    handle = open(home / LOCK_FILE, "a+")  # noqa: SIM115 - held for the supervisor's lifetime
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise StartupError(
            f"another Echo Memory (pid {holder}) is already running with data directory {home}; "
            "stop it with `echo-memory down` or set ECHO_MEMORY_HOME to another directory"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def choose_port(
    configured: int, what: str, variable: str, previous: int | None = None, avoid: frozenset[int] = frozenset()
) -> int:
    """The configured port, else `previous` while it is free, else a free port not in `avoid`.

    Raises StartupError when a configured port is taken (a remembered one just gives way).
    `avoid` holds ports already chosen for this start that nothing listens on yet.
    """
    if configured == 0:
        if previous is not None and previous not in avoid and not port_in_use(previous):
            return previous
        port = free_port()
        while port in avoid:
            port = free_port()
        return port
    if port_in_use(configured):
        raise StartupError(f"port {configured} for {what} is already in use; set {variable} to a free port or 0")
    return configured


def remembered_port(path: Path) -> int | None:
    """The port written at `path` by an earlier run; None when there is none or it is not a port."""
    try:
        port = int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return port if 0 < port < 65536 else None


class Supervisor:
    def __init__(self, settings: Settings, *, durable: bool = True) -> None:
        self.settings = settings
        self.home = settings.home.expanduser().resolve()
        self.durable = durable
        self.children: dict[str, Child] = {}
        self.pg: EmbeddedPostgres | None = None
        self.nats: NatsServer | None = None
        self.state: State | None = None
        self._stopping = False
        self._lock: IO[str] | None = None

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> State:
        """Bring everything up; raises StartupError with one sentence when something is in the way."""
        self._lock = acquire_lock(self.home)
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> State:
        # The edge first: a free port picked for Postgres or NATS must not take its remembered one.
        previous = remembered_port(self.home / EDGE_PORT_FILE)
        edge_port = choose_port(self.settings.edge_port, "the MCP edge", "ECHO_MEMORY_EDGE_PORT", previous)
        pg_port = choose_port(self.settings.pg_port, "Postgres", "ECHO_MEMORY_PG_PORT", avoid=frozenset({edge_port}))
        nats_port = choose_port(self.settings.nats_port, "NATS", "ECHO_MEMORY_NATS_PORT",
                                 avoid=frozenset({edge_port, pg_port}))
        if previous is not None and edge_port != previous and self.settings.edge_port == 0:
            self._say(f"port {previous} of the last run is in use: the MCP edge moves to {edge_port}; "
                      "update clients that were given the old address")
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        (self.home / EDGE_PORT_FILE).write_text(f"{edge_port}\n")
        self.state = State(
            supervisor_pid=os.getpid(), home=str(self.home), org=self.settings.org,
            started_at=datetime.now(tz=UTC), pg_port=pg_port,
        )
        self._say(f"data directory {self.home}")
        self.pg = EmbeddedPostgres(self.home / "postgres", pg_port, durable=self.durable)
        self.pg.start()
        self.state.components["postgres"] = Component(
            name="postgres", pid=self.pg.pid(), port=pg_port, status="running", log=str(self.pg.log)
        )
        applied = apply_migrations(self.pg.url())
        self._say("schema: applied " + ", ".join(applied) if applied else "schema: up to date")
        self.nats = NatsServer(self.home / "nats", nats_port)
        self.nats.start()
        self.state.nats_url = self.nats.url
        self.state.components["nats"] = Component(
            name="nats", pid=self.nats.process.pid if self.nats.process else None, port=nats_port,
            status="running", log=str(self.home / "nats" / "nats.log"),
        )
        eventloop.run(register_org(self.nats.url, self.settings.org, self.pg.url()), use_uvloop=self.settings.uvloop)
        env = self._child_env(self.pg.url(), self.nats.url)
        for name in NAMES:
            child = Child(name=name, env=env, port=edge_port if name == "edge" else None)
            self.children[name] = child
            self._spawn(child)
        self.state.edge_url = f"http://127.0.0.1:{edge_port}/mcp"
        self._write()
        if not wait_for_port(edge_port, timeout=60):
            raise StartupError(f"the MCP edge did not start; see {self.home / 'logs' / 'edge.log'}")
        self._wait_services_ready(timeout=90)
        self.state.ready = True
        self._write()
        return self.state

    def _child_env(self, database_url: str, nats_url: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            ECHO_MEMORY_HOME=str(self.home),
            ECHO_MEMORY_ORG=self.settings.org,
            ECHO_MEMORY_DATABASE_URL=database_url,
            ECHO_MEMORY_NATS_URL=nats_url,
            ECHO_MEMORY_EDGE_HOST=self.settings.edge_host,
            PYTHONUNBUFFERED="1",
        )
        return env

    def _spawn(self, child: Child) -> None:
        env = dict(child.env)
        if child.port is not None:
            env["ECHO_MEMORY_EDGE_PORT"] = str(child.port)
        if child.log is None:
            child.log = open(self.home / "logs" / f"{child.name}.log", "ab")  # noqa: SIM115
        child.log.write(f"--- start {datetime.now(tz=UTC).isoformat()}\n".encode())
        child.log.flush()
        child.log_offset = child.log.tell()
        child.process = subprocess.Popen(
            [sys.executable, "-m", "libs.cli", "service", child.name],
            env=env, stdin=subprocess.DEVNULL, stdout=child.log, stderr=subprocess.STDOUT,
        )
        child.started_at = time.monotonic()
        assert self.state is not None
        self.state.components[child.name] = Component(
            name=child.name, pid=child.process.pid, port=child.port, status="running",
            restarts=child.restarts, last_exit=child.last_exit, log=str(self.home / "logs" / f"{child.name}.log"),
        )

    def _wait_services_ready(self, timeout: float) -> None:
        """A service prints `ready` in its log once subscribed; wait for all of them."""
        deadline = time.monotonic() + timeout
        pending = {n for n in self.children if n != "edge"}
        while pending and time.monotonic() < deadline:
            for name in list(pending):
                child = self.children[name]
                with open(self.home / "logs" / f"{name}.log", "rb") as handle:
                    handle.seek(child.log_offset)  # only this run's output: an old "ready" never counts
                    log = handle.read()
                if f"echo-memory {name}: ready".encode() in log:
                    pending.discard(name)
                if child.process is not None and child.process.poll() is not None and name in pending:
                    tail = log.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
                    raise StartupError(f"the {name} service exited at start: {tail[0]}")
            time.sleep(0.1)
        if pending:
            raise StartupError(f"services not ready after {timeout:.0f} s: {', '.join(sorted(pending))}")

    # -- run -----------------------------------------------------------------------------------
    def run_forever(self) -> None:
        """Watch children until SIGINT/SIGTERM; restart the ones that die, with back-off."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        while not self._stopping:
            self._check_children()
            time.sleep(0.2)

    def _on_signal(self, signum: int, frame: object) -> None:
        self._stopping = True

    def _check_children(self) -> None:
        now = time.monotonic()
        changed = False
        for child in self.children.values():
            process = child.process
            if process is not None and process.poll() is None:
                if now - child.started_at > HEALTHY_AFTER:
                    child.backoff = BACKOFF_START
                continue
            if process is not None:  # it just died: schedule a restart
                child.last_exit = process.returncode
                child.process = None
                child.next_start = now + child.backoff
                self._say(f"{child.name} exited with code {child.last_exit}; restarting in {child.backoff:.1f} s")
                self._mark(child.name, status="restarting", last_exit=child.last_exit, pid=None)
                child.backoff = min(child.backoff * 2, BACKOFF_MAX)
                changed = True
            elif now >= child.next_start:
                child.restarts += 1
                self._spawn(child)
                changed = True
        if changed:
            self._write()

    def _mark(self, name: str, **fields: object) -> None:
        assert self.state is not None
        component = self.state.components[name]
        self.state.components[name] = component.model_copy(update=fields)

    # -- stop ----------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop children, then NATS, then Postgres; safe to call more than once."""
        for child in self.children.values():
            if child.process is not None and child.process.poll() is None:
                child.process.terminate()
        for child in self.children.values():
            if child.process is not None:
                try:
                    child.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.process.kill()
                    child.process.wait()
            if child.log is not None:
                child.log.close()
        self.children.clear()
        if self.nats is not None:
            self.nats.stop()
            self.nats = None
        if self.pg is not None:
            try:
                self.pg.stop()
            finally:
                self.pg = None
        try:
            state_path(self.home).unlink()
        except FileNotFoundError:
            pass
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _write(self) -> None:
        if self.state is not None:
            write_state(self.home, self.state)

    @staticmethod
    def _say(message: str) -> None:
        print(f"echo-memory: {message}", flush=True)
