"""Clean up after a supervisor that died without stopping (killed with -9, or the machine's OOM killer).

Its children keep running: services, the edge, nats-server and Postgres. `state.json` names them;
a pid is only acted on when the process still is what the state says (same command, same data
directory), so a pid the OS has since given to something else is left alone.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import psutil

from echo_memory.libs.local.supervisor.postgres import EmbeddedPostgres
from echo_memory.libs.local.supervisor.state import Component, State, state_path

TERMINATE_GRACE = 10.0


def stop_leftovers(home: Path, state: State) -> list[str]:
    """Stop every component `state` names that still runs, then remove `state.json`.

    Returns the names of the components that were still running (empty when nothing was).
    Raises PostgresError when a leftover Postgres refuses to stop; `state.json` then stays.
    """
    stopped: list[str] = []
    processes: list[psutil.Process] = []
    for component in state.components.values():
        if component.name == "postgres":
            continue
        process = _still_ours(home, component)
        if process is not None and process not in processes:  # services sharing a process: stopped once
            stopped.append(component.name)
            processes.append(process)
            _signal(process, kill=False)
    _, alive = psutil.wait_procs(processes, timeout=TERMINATE_GRACE)
    for process in alive:
        _signal(process, kill=True)
    psutil.wait_procs(alive, timeout=TERMINATE_GRACE)
    postgres = EmbeddedPostgres(home / "postgres", state.pg_port or 0)
    if postgres.pid() is not None and postgres.leftover_processes():
        stopped.append("postgres")
    postgres.stop()
    state_path(home).unlink(missing_ok=True)
    return stopped


def _still_ours(home: Path, component: Component) -> psutil.Process | None:
    if component.pid is None:
        return None
    try:
        process = psutil.Process(component.pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        command = process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    if component.name == "nats":
        ours = bool(command) and Path(command[0]).name == "nats-server" and str(home / "nats") in " ".join(command)
    else:
        # `service NAME…`: a process of its own or one hosting several services
        hosted = command[command.index("service") + 1:] if "service" in command else []
        ours = component.name in hosted and _home_of(process) == str(home)
    return process if ours else None


def _home_of(process: psutil.Process) -> str | None:
    try:
        return process.environ().get("ECHO_MEMORY_HOME")
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def _signal(process: psutil.Process, *, kill: bool) -> None:
    with contextlib.suppress(psutil.NoSuchProcess):
        process.kill() if kill else process.terminate()
