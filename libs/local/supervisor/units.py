"""What the supervisor watches: one restart policy for Postgres, nats-server and every service.

A unit that exits is started again after a back-off (0.5 s doubling to 30 s, reset after a
minute of health); each restart is counted, and a start that fails outright counts as an exit.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Protocol

from echo_memory.libs.local.private_files import open_private_append

BACKOFF_START = 0.5
BACKOFF_MAX = 30.0
HEALTHY_AFTER = 60.0
SERVICE_STOP_TIMEOUT = 10.0


class Restartable(Protocol):
    """A process the supervisor can (re)start without waiting and poll for its exit."""

    def launch(self) -> None: ...

    def exit_code(self) -> int | None: ...

    def pid(self) -> int | None: ...


class ServiceProcess:
    """`echo-memory service NAME…` as a child process, appending its output to `log_path`.

    `hosts` are the services it runs (default: the one called `name`).
    """

    def __init__(self, name: str, env: dict[str, str], log_path: Path, hosts: tuple[str, ...] = ()) -> None:
        self.name = name
        self.hosts = hosts or (name,)
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.log_offset = 0  # where the current run's output starts in the (appended) log file
        self._log: IO[bytes] | None = None

    def launch(self) -> None:
        if self._log is None:
            self._log = open_private_append(self.log_path)  # kept open for every run of the child
        self._log.write(f"--- start {datetime.now(tz=UTC).isoformat()}\n".encode())
        self._log.flush()
        self.log_offset = self._log.tell()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "echo_memory.libs.local.cli", "service", *self.hosts],
            env=self.env, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
        )

    def exit_code(self) -> int | None:
        return self.process.poll() if self.process is not None else None

    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def current_output(self) -> bytes:
        """What the current run has written to its log so far (an earlier run's never counts)."""
        with open(self.log_path, "rb") as handle:
            handle.seek(self.log_offset)
            return handle.read()

    def terminate(self) -> None:
        """Ask a running child to stop (SIGTERM) without waiting; `stop()` waits."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def stop(self) -> None:
        """Terminate, wait up to SERVICE_STOP_TIMEOUT, then kill; closes the log."""
        if self.process is not None:
            self.terminate()
            try:
                self.process.wait(timeout=SERVICE_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


@dataclass
class Unit:
    """One supervised process and its restart bookkeeping."""

    name: str
    process: Restartable
    restarts: int = 0
    backoff: float = BACKOFF_START
    started_at: float = field(default_factory=time.monotonic)
    next_start: float | None = None  # set while the unit is down and waiting to start again
    last_exit: int | None = None

    def exited(self, code: int | None, now: float) -> float:
        """Record an exit (None: the start itself failed); returns the delay before the next start."""
        delay = self.backoff
        self.last_exit = code
        self.next_start = now + delay
        self.backoff = min(self.backoff * 2, BACKOFF_MAX)
        return delay

    def started(self, now: float) -> None:
        self.next_start = None
        self.started_at = now

    def settle(self, now: float) -> None:
        """A unit that has run for HEALTHY_AFTER seconds starts over from the shortest back-off."""
        if now - self.started_at > HEALTHY_AFTER:
            self.backoff = BACKOFF_START
