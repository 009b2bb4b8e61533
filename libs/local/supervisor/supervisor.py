"""`echo-memory up`: start Postgres, NATS and every service; restart what dies; stop it all cleanly.

Services are separate processes (`echo-memory service NAME`), each logging to
`<home>/logs/<name>.log`. Postgres, nats-server and every service that exits is restarted on the
same port with exponential back-off (libs/local/supervisor/units.py); the restart is logged and counted
in state.json, which `echo-memory status` reads.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from echo_memory.libs.core.config import Settings
from echo_memory.libs.local.supervisor.bus_auth import (
    RUN_DIR,
    credentials_file,
    ensure_credentials,
    server_config,
    write_server_config,
)
from echo_memory.libs.local.supervisor.leftovers import stop_leftovers
from echo_memory.libs.local.supervisor.nats import NatsError, NatsServer
from echo_memory.libs.local.supervisor.ports import free_port, port_in_use, wait_for_port
from echo_memory.libs.local.supervisor.postgres import EmbeddedPostgres, PostgresError
from echo_memory.libs.local.supervisor.state import Component, State, read_state, state_path, write_state
from echo_memory.libs.local.supervisor.units import Restartable, ServiceProcess, Unit
from echo_memory.libs.server import eventloop
from echo_memory.libs.server.bus.permissions import ADMIN_USER
from echo_memory.libs.server.orgs import register_org
from echo_memory.libs.server.service.registry import process_groups
from echo_memory.libs.server.store.schema import apply_migrations

LOCK_FILE = "supervisor.lock"
# Each component's last port (when none is configured), reused while free: the client line
# `quickstart` printed once keeps working, and a client holding the old NATS URL (a running
# `echo-memory mcp`) reconnects to the new run by itself.
EDGE_PORT_FILE = "edge-port"
PG_PORT_FILE = "pg-port"
NATS_PORT_FILE = "nats-port"
# Generous: on a loaded 2-core machine the edge's imports alone took most of a minute.
EDGE_START_TIMEOUT = 120.0


class StartupError(RuntimeError):
    """One clear sentence for the user; `up` prints it and exits non-zero."""


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
        self.units: dict[str, Unit] = {}
        self.services: dict[str, ServiceProcess] = {}  # by process: "services" hosts several, "edge" one
        self.pg: EmbeddedPostgres | None = None
        self.nats: NatsServer | None = None
        self.state: State | None = None
        self._stopping = False
        self._lock: IO[str] | None = None
        self._notices: list[str] = []
        self._edge_moved_from: int | None = None

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> State:
        """Bring everything up; raises StartupError with one sentence when something is in the way."""
        self._lock = acquire_lock(self.home)
        try:
            self._clean_after_crash()
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _clean_after_crash(self) -> None:
        """A state.json under a free lock is what a killed supervisor left: stop its processes first."""
        stale = read_state(self.home)
        if stale is None:
            return
        stopped = stop_leftovers(self.home, stale)
        if stopped:
            self._say(f"the last run (pid {stale.supervisor_pid}) ended without stopping; stopped what it "
                      f"left running: {', '.join(stopped)}")

    def _choose_ports(self) -> tuple[int, int, int]:
        """Edge, Postgres and NATS ports: configured, else last run's while free, else free ones.

        A free port picked for one component never takes another's remembered port. A remembered
        port that was taken stays remembered, so the next start returns to it once it is free.
        """
        wanted = (
            ("the MCP edge", self.settings.edge_port, "ECHO_MEMORY_EDGE_PORT", EDGE_PORT_FILE),
            ("Postgres", self.settings.pg_port, "ECHO_MEMORY_PG_PORT", PG_PORT_FILE),
            ("NATS", self.settings.nats_port, "ECHO_MEMORY_NATS_PORT", NATS_PORT_FILE),
        )
        remembered = {file: remembered_port(self.home / file) for _, _, _, file in wanted}
        chosen: list[int] = []
        for what, configured, variable, file in wanted:
            previous = remembered[file]
            others = {port for name, port in remembered.items() if name != file and port is not None}
            port = choose_port(configured, what, variable, previous, avoid=frozenset(others | set(chosen)))
            if previous is not None and port != previous and configured == 0:
                notice = f"port {previous} of the last run is in use: {_moved(what, port, previous)}"
                self._notices.append(notice)
                self._say(notice)
                if file == EDGE_PORT_FILE:
                    self._edge_moved_from = previous
            else:
                (self.home / file).parent.mkdir(parents=True, exist_ok=True)
                (self.home / file).write_text(f"{port}\n")
            chosen.append(port)
        edge_port, pg_port, nats_port = chosen
        return edge_port, pg_port, nats_port

    def _start(self) -> State:
        edge_port, pg_port, nats_port = self._choose_ports()
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        self.state = State(
            supervisor_pid=os.getpid(), home=str(self.home), org=self.settings.org,
            started_at=datetime.now(tz=UTC), pg_port=pg_port, notices=self._notices,
            edge_moved_from=self._edge_moved_from,
        )
        self._say(f"data directory {self.home}")
        self.pg = EmbeddedPostgres(self.home / "postgres", pg_port, durable=self.durable)
        self.pg.start()
        self._watch("postgres", self.pg, port=pg_port, log=self.pg.log)
        applied = apply_migrations(self.pg.url())
        self._say("schema: applied " + ", ".join(applied) if applied else "schema: up to date")
        # Every process kind gets its own NATS user; the server accepts no connection without one.
        users = ensure_credentials(self.home)
        config = self.home / "nats" / "nats.conf"
        write_server_config(config, server_config(nats_port, self.home / "nats", users))
        self.nats = NatsServer(self.home / "nats", nats_port, config=config)
        self.nats.start()
        self.state.nats_url = self.nats.url
        self._watch("nats", self.nats, port=nats_port, log=self.home / "nats" / "nats.log")
        eventloop.run(register_org(self.nats.url, self.settings.org, self.pg.url(), users[ADMIN_USER]),
                      use_uvloop=self.settings.uvloop)
        env = self._child_env(self.pg.url(), self.nats.url)
        for name, hosts in process_groups(self.settings.services_in_one_process).items():
            service_env = dict(env)
            if hosts == (name,):
                service_env["ECHO_MEMORY_NATS_CREDENTIALS"] = str(credentials_file(self.home, name))
            else:  # each hosted service connects as its own user, from its own file in this directory
                service_env["ECHO_MEMORY_NATS_CREDENTIALS_DIR"] = str(self.home / RUN_DIR)
            if name == "edge":
                service_env["ECHO_MEMORY_EDGE_PORT"] = str(edge_port)
            service = ServiceProcess(name, service_env, self.home / "logs" / f"{name}.log", hosts=hosts)
            service.launch()
            self.services[name] = service
            self._watch(name, service, port=edge_port if name == "edge" else None, log=service.log_path)
        self.state.edge_url = f"http://127.0.0.1:{edge_port}/mcp"
        self._write()
        if not wait_for_port(edge_port, timeout=EDGE_START_TIMEOUT):
            raise StartupError(f"the MCP edge did not start; see {self.home / 'logs' / 'edge.log'}")
        self._wait_services_ready(timeout=90)
        self.state.ready = True
        self._write()
        return self.state

    def _watch(self, name: str, process: ServiceProcess | NatsServer | EmbeddedPostgres, *, port: int | None,
               log: Path) -> None:
        assert self.state is not None
        self.units[name] = Unit(name=name, process=process)
        for component in self._components(name, process):
            self.state.components[component] = Component(
                name=component, pid=process.pid(), port=port, status="running", log=str(log)
            )

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

    def _wait_services_ready(self, timeout: float) -> None:
        """A service prints `ready` in its process's log once subscribed; wait for all of them."""
        deadline = time.monotonic() + timeout
        pending = {(process, name) for process, service in self.services.items() for name in service.hosts
                   if name != "edge"}
        while pending and time.monotonic() < deadline:
            for process, name in sorted(pending):
                service = self.services[process]
                log = service.current_output()
                if f"echo-memory {name}: ready".encode() in log:
                    pending.discard((process, name))
                elif service.exit_code() is not None:
                    tail = log.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
                    raise StartupError(f"the {name} service exited at start: {tail[0]}")
            time.sleep(0.1)
        if pending:
            raise StartupError(f"services not ready after {timeout:.0f} s: {', '.join(sorted(n for _, n in pending))}")

    # -- run -----------------------------------------------------------------------------------
    def catch_signals(self) -> None:
        """From now on SIGINT/SIGTERM only ask `run_forever` to stop (safe to call twice).

        Called as soon as the system is up, before the start-up lines: work done between then and
        `run_forever` (issuing the client's token on an event loop) finishes first, rather than
        being cancelled by a Ctrl-C that code on the way might swallow, and the stop still happens.
        """
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def run_forever(self) -> None:
        """Watch every unit until SIGINT/SIGTERM (at once if one came since `catch_signals`);
        restart the ones that die, with back-off."""
        self.catch_signals()
        while not self._stopping:
            self.check_units()
            time.sleep(0.2)

    def _on_signal(self, signum: int, frame: object) -> None:
        self._stopping = True

    def check_units(self) -> None:
        """One round: note every unit that exited, and start the ones whose back-off has passed.

        Postgres and NATS come first, so a service restarted in the same round finds them.
        """
        changed = False
        for unit in self.units.values():
            if self._stopping:
                break
            now = time.monotonic()
            if unit.next_start is None:
                code = unit.process.exit_code()
                if code is None:
                    unit.settle(now)
                    continue
                delay = unit.exited(code, now)
                self._say(f"{unit.name} exited with code {code}; restarting in {delay:.1f} s")
                self._mark(unit.name, status="restarting", last_exit=code, pid=None)
            elif now >= unit.next_start:
                unit.restarts += 1
                try:
                    unit.process.launch()
                except (OSError, PostgresError, NatsError) as exc:
                    delay = unit.exited(None, time.monotonic())
                    self._say(f"{unit.name} could not start ({exc}); trying again in {delay:.1f} s")
                    self._mark(unit.name, restarts=unit.restarts)
                else:
                    unit.started(time.monotonic())
                    self._mark(unit.name, status="running", pid=unit.process.pid(), restarts=unit.restarts)
            else:
                continue
            changed = True
        if changed:
            self._write()

    @staticmethod
    def _components(unit: str, process: Restartable) -> tuple[str, ...]:
        """What `unit` runs: the services a service process hosts, else the unit itself (Postgres, NATS)."""
        return process.hosts if isinstance(process, ServiceProcess) else (unit,)

    def _mark(self, unit: str, **fields: object) -> None:
        """Update the components `unit` runs (every service of a shared process)."""
        assert self.state is not None
        for name in self._components(unit, self.units[unit].process):
            self.state.components[name] = self.state.components[name].model_copy(update=fields)

    # -- stop ----------------------------------------------------------------------------------
    def stop(self) -> bool:
        """Stop services, then NATS, then Postgres, whatever state each is in; safe to call twice.

        A step that fails is said in one line and the others still run; state.json is removed and
        the lock released either way. Returns False when some step failed.
        """
        self._stopping = True
        steps: list[tuple[str, Callable[[], None]]] = [("the services", self._stop_services)]
        if self.nats is not None:
            steps.append(("nats-server", self.nats.stop))
        if self.pg is not None:
            steps.append(("Postgres", self.pg.stop))
        clean = True
        for what, step in steps:
            try:
                step()
            except (PostgresError, OSError, subprocess.SubprocessError) as exc:  # keep stopping the rest
                self._say(f"could not stop {what}: {exc}")
                clean = False
        self.units.clear()
        self.nats = None
        self.pg = None
        state_path(self.home).unlink(missing_ok=True)
        if self._lock is not None:
            self._lock.close()
            self._lock = None
        return clean

    def _stop_services(self) -> None:
        for service in self.services.values():
            service.terminate()
        for service in self.services.values():
            service.stop()
        self.services.clear()

    def _write(self) -> None:
        if self.state is not None:
            write_state(self.home, self.state)

    @staticmethod
    def _say(message: str) -> None:
        print(f"echo-memory: {message}", flush=True)


def _moved(what: str, port: int, previous: int) -> str:
    if what == "NATS":
        return (f"NATS moves to {port}; running `echo-memory mcp` sessions follow it, other clients given "
                "the old NATS URL need the new one")
    if what == "Postgres":
        return f"Postgres moves to {port}"
    return (f"{what} moves to {port} for this run; clients given the old address need the new client line "
            f"(`echo-memory line`) until the next start, which returns to {previous} once it is free")
