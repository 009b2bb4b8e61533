"""Helpers of the image tests: the references `make images` builds, podman with the project's
containers.conf, the containers a test starts. APP_IMAGE / PG_IMAGE override the references."""

from __future__ import annotations

import os
import subprocess
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
APP_IMAGE = os.environ.get("APP_IMAGE", f"localhost/echo-memory:{VERSION}")
PG_IMAGE = os.environ.get("PG_IMAGE", "localhost/echo-postgres:17")
# What Kubernetes' restricted profile and the chart's securityContext impose, as podman flags.
LOCKED_DOWN = ["--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
START_TIMEOUT = 120.0


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF",
                                                          str(ROOT / "deploy" / "images" / "containers.conf"))}
    out = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, env=env, check=False)
    if check and out.returncode != 0:
        raise AssertionError(f"podman {' '.join(args[:3])} … exited {out.returncode}: {out.stderr.strip()}")
    return out


@dataclass
class Containers:
    """The containers one test started (removed at the end) and their logs for failure messages."""

    ids: dict[str, str] = field(default_factory=dict)

    def run(self, name: str, *args: str) -> str:
        self.ids[name] = podman("run", "-d", "--network", "host", *args).stdout.strip()
        return self.ids[name]

    def logs(self) -> str:
        parts = []
        for name, cid in self.ids.items():
            out = podman("logs", "--tail", "15", cid, check=False)
            state = podman("inspect", "--format", "{{.State.Status}} exit={{.State.ExitCode}}", cid, check=False)
            parts.append(f"--- {name} ({state.stdout.strip()})\n{out.stdout}{out.stderr}")
        return "\n".join(parts)

    def remove(self) -> None:
        if self.ids:
            podman("rm", "-f", "-t", "3", *self.ids.values(), check=False)


def wait(what: str, probe: Callable[[], bool], containers: Containers, timeout: float = START_TIMEOUT) -> None:
    """Poll `probe` until it is true; AssertionError with the containers' logs when it never is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if probe():
                return
        except (OSError, psycopg.Error):
            pass
        time.sleep(0.5)
    raise AssertionError(f"{what} not ready after {timeout:.0f} s\n{containers.logs()}")
