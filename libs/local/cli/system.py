"""`up`, `down`, `quickstart`, `status`: the embedded system's lifecycle."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.admin import NoArgs, StatusResult, TokenCreateInput, TokenVerifyInput
from echo_memory.libs.core.contracts.demo import is_demo_scope
from echo_memory.libs.core.contracts.errors import EchoError, SchemaTooNew
from echo_memory.libs.core.contracts.tokens import hash_token
from echo_memory.libs.core.contracts.verbs import STATUS, TOKEN_CREATE, TOKEN_VERIFY
from echo_memory.libs.local.connection import admin_call
from echo_memory.libs.local.supervisor.leftovers import stop_leftovers
from echo_memory.libs.local.supervisor.nats import NatsError
from echo_memory.libs.local.supervisor.postgres import PostgresError
from echo_memory.libs.local.supervisor.state import State, read_state
from echo_memory.libs.local.supervisor.supervisor import StartupError, Supervisor, acquire_lock
from echo_memory.libs.server import eventloop
from echo_memory.libs.server.store.access import DEFAULT_GRANTS

QUICKSTART_AGENT = "claude-code"


def up(settings: Settings, *, detach: bool = False, quickstart: bool = False, background: bool = False) -> int:
    """Start everything and stay in the foreground until Ctrl-C (or detach and return).

    The client line is printed by `quickstart`, and by `up` too when the edge could not have its
    remembered port (the line clients were given stopped working). `background` is the child of
    `--detach`: its output goes to a log file, so it prints no line and no token; the parent does.
    """
    if detach:
        return _detach(settings, quickstart)
    supervisor = Supervisor(settings)
    try:
        state = supervisor.start()
    except (StartupError, PostgresError, NatsError, SchemaTooNew) as exc:
        print(f"echo-memory: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        supervisor.stop()
        return 130
    clean = False
    try:
        supervisor.catch_signals()  # a Ctrl-C from here on, even mid-token, stops the system below
        print(f"echo-memory: ready — MCP at {state.edge_url}", flush=True)
        if not background and (quickstart or state.edge_moved_from is not None):
            code = _print_client_line(settings, state.edge_url or "")
            if code:
                return code
        print("echo-memory: Ctrl-C stops everything", flush=True)
        supervisor.run_forever()
    except KeyboardInterrupt:
        pass  # Ctrl-C before the handlers were in place: stop the same way as after them
    finally:
        print("echo-memory: stopping", flush=True)
        clean = supervisor.stop()
        print("echo-memory: stopped" if clean else "echo-memory: stopped, with the failures above", flush=True)
    return 0 if clean else 1


def _print_client_line(settings: Settings, edge_url: str) -> int:
    """Print the user-scoped `claude mcp add` line and how to wire every client.

    The token is kept (0600) in the data directory and reused while it stays valid, so each start
    does not leave another active token behind.
    """
    try:
        token, agent, reused = _quickstart_token(settings)
    except EchoError as exc:
        print(f"echo-memory: could not issue a token: {exc.message}", file=sys.stderr)
        return 1
    print(f"echo-memory: token for agent '{agent}'{' (kept from an earlier start)' if reused else ''}: {token}")
    print("echo-memory: connect Claude Code, for every project of this user, with:")
    print(
        f"  claude mcp add --scope user --transport http echo-memory {edge_url} "
        f'--header "Authorization: Bearer {token}"',
        flush=True,
    )
    print("echo-memory: if Claude Code answers that echo-memory already exists, replace the old entry: run "
          "`claude mcp remove echo-memory --scope user`, then the line above")
    print("echo-memory: or wire every client found on this machine (MCP entry with its own agent id, "
          "instructions, skill, recall/capture hooks; shows the diff first) with:")
    print("  echo-memory install --global", flush=True)
    return 0


QUICKSTART_TOKEN_FILE = "quickstart-token"


def _quickstart_token(settings: Settings) -> tuple[str, str, bool]:
    """(token, agent id, reused): the saved quickstart token while the system still accepts it, else a new one."""
    path = settings.home.expanduser() / QUICKSTART_TOKEN_FILE
    try:
        saved = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        saved = ""
    if saved:
        verified = eventloop.run(admin_call(settings, TOKEN_VERIFY, TokenVerifyInput(token_hash=hash_token(saved))),
                                 use_uvloop=settings.uvloop)
        if verified.valid and verified.agent_id:
            return saved, verified.agent_id, True
    request = TokenCreateInput(agent_id=QUICKSTART_AGENT, read_scopes=list(DEFAULT_GRANTS),
                               write_scopes=list(DEFAULT_GRANTS))
    created = eventloop.run(admin_call(settings, TOKEN_CREATE, request), use_uvloop=settings.uvloop)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(created.token + "\n")
    os.chmod(path, 0o600)  # an older file keeps its mode through O_TRUNC
    return created.token, created.agent_id, False


def _detach(settings: Settings, quickstart: bool) -> int:
    home = settings.home.expanduser()
    home.mkdir(parents=True, exist_ok=True)
    log = open(home / "supervisor.log", "ab")  # noqa: SIM115
    args = [sys.executable, "-m", "echo_memory.libs.local.cli", "up", "--background"]
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = read_state(home)
        if state is not None and state.ready and state.supervisor_pid == process.pid:
            for notice in state.notices:  # said in the log too, but the user is looking here
                print(f"echo-memory: {notice}")
            print(f"echo-memory: running in the background (pid {process.pid}); MCP at {state.edge_url}")
            print(f"echo-memory: log {home / 'supervisor.log'}; stop with `echo-memory down`", flush=True)
            if quickstart or state.edge_moved_from is not None:
                return _print_client_line(settings, state.edge_url or "")
            return 0
        if process.poll() is not None:
            tail = (home / "supervisor.log").read_text(errors="replace").strip().splitlines()[-1:]
            print(f"echo-memory: the background start failed: {tail[0] if tail else 'no output'}", file=sys.stderr)
            return 1
        time.sleep(0.2)
    print("echo-memory: the background start did not become ready within 120 s", file=sys.stderr)
    return 1


def down(settings: Settings, timeout: float = 60.0) -> int:
    """Stop the running supervisor of this data directory and wait until it is gone.

    When the supervisor died without stopping (killed with -9), stops what it left running and
    removes its state instead. Returns 0 when nothing of this data directory runs any more.
    """
    home = settings.home.expanduser().resolve()
    state = read_state(home)
    if state is None:
        print(f"echo-memory: nothing is running for {home}")
        return 0
    if not psutil.pid_exists(state.supervisor_pid) or _is_zombie(state.supervisor_pid):
        return _down_after_crash(home, state)
    os.kill(state.supervisor_pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not psutil.pid_exists(state.supervisor_pid) or _is_zombie(state.supervisor_pid):
            print("echo-memory: stopped")
            return 0
        time.sleep(0.1)
    print(f"echo-memory: pid {state.supervisor_pid} did not stop within {timeout:.0f} s", file=sys.stderr)
    return 1


def _down_after_crash(home: Path, state: State) -> int:
    try:
        lock = acquire_lock(home)  # held while cleaning, so an `up` cannot start halfway through
    except StartupError as exc:
        print(f"echo-memory: {exc}", file=sys.stderr)
        return 1
    try:
        stopped = stop_leftovers(home, state)
    except PostgresError as exc:
        print(f"echo-memory: {exc}", file=sys.stderr)
        return 1
    finally:
        lock.close()
    if stopped:
        print(f"echo-memory: the supervisor (pid {state.supervisor_pid}) was gone; stopped what it left "
              f"running: {', '.join(stopped)}")
    else:
        print(f"echo-memory: the supervisor (pid {state.supervisor_pid}) was gone; removed its stale state")
    print("echo-memory: stopped")
    return 0


def _is_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def line(settings: Settings) -> int:
    """Print the current client line (the running edge's URL and the kept quickstart token).

    The token is the one `quickstart` keeps, reused while it is valid and issued anew otherwise.
    Exit code 1 with one sentence on stderr when nothing runs for this data directory.
    """
    home = settings.home.expanduser()
    state = read_state(home)
    running = state is not None and psutil.pid_exists(state.supervisor_pid) and not _is_zombie(state.supervisor_pid)
    if state is not None and running and not (state.ready and state.edge_url):
        print("echo-memory line: Echo Memory is still starting; try again in a few seconds", file=sys.stderr)
        return 1
    if state is None or not running or not state.edge_url:
        print(f"echo-memory line: Echo Memory is not running for {home}; start it with `echo-memory up` "
              "(or `echo-memory up --detach`)", file=sys.stderr)
        return 1
    if state.edge_moved_from is not None:
        print(f"echo-memory: the MCP edge's remembered port {state.edge_moved_from} was in use at start; "
              "this line holds until the next start")
    return _print_client_line(settings, state.edge_url)


def status(settings: Settings, *, include_demo: bool = False) -> int:
    """Print each component's truth: running or not, port, pid, restarts; then schema and facts.

    Exit code 0 when every component runs, 1 otherwise (including when nothing runs).
    """
    home = settings.home.expanduser()
    state = read_state(home)
    print(f"data directory: {home}")
    if state is None or not psutil.pid_exists(state.supervisor_pid) or _is_zombie(state.supervisor_pid):
        print("supervisor: not running (start with `echo-memory up`)")
        return 1
    print(f"supervisor: running, pid {state.supervisor_pid}, since {state.started_at:%Y-%m-%d %H:%M:%S} UTC")
    print(f"MCP: {state.edge_url}")
    all_up = True
    print(f"{'component':<14}{'state':<12}{'pid':>8}{'port':>8}{'restarts':>10}")
    for component in state.components.values():
        alive = component.pid is not None and psutil.pid_exists(component.pid) and not _is_zombie(component.pid)
        shown = component.status if (alive or component.status != "running") else "dead"
        all_up &= alive and component.status == "running"
        print(
            f"{component.name:<14}{shown:<12}{component.pid or '-':>8}{component.port or '-':>8}"
            f"{component.restarts:>10}"
        )
    try:
        result = eventloop.run(admin_call(settings, STATUS, NoArgs(), timeout=5), use_uvloop=settings.uvloop)
    except EchoError as exc:
        print(f"schema: unknown ({exc.message})")
        return 1
    print("\n".join(render_store(result, include_demo=include_demo)))
    return 0 if all_up else 1


def render_store(result: StatusResult, *, include_demo: bool = False) -> list[str]:
    """The schema version, then per scope its facts and, under it, each agent that wrote there.

    demo-seed's scopes (demo, demo-*) are left out unless `include_demo`; a line says how many were.
    """
    lines = [f"schema version: {result.schema_version}"]
    hidden = [s.scope for s in result.scopes if not include_demo and is_demo_scope(s.scope)]
    for scope in result.scopes:
        if scope.scope in hidden:
            continue
        last = f", last write {scope.last_write:%Y-%m-%d %H:%M:%S}" if scope.last_write else ""
        lines.append(f"scope {scope.scope}: {scope.active_facts} active facts, {scope.facts} in history{last}")
        lines += [f"  {w.agent_id:<20} {w.active_facts:>7} active {w.facts:>7} in history, "
                  f"last write {w.last_write:%Y-%m-%d %H:%M:%S}" for w in scope.writers]
    if hidden:
        lines.append(f"demo scopes not shown: {', '.join(hidden)} (invented data; `status --include-demo` lists them)")
    return lines
