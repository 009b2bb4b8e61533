"""A service on Kubernetes (health port set) waits not-ready for its migration instead of exiting."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.server.store.schema import apply_migrations

BIN = Path(sys.executable).parent / "echo-memory"


def probe(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def wait_probe(port: int, path: str, code: int, contains: str = "", timeout: float = 150) -> str:
    deadline = time.monotonic() + timeout
    last: tuple[int, str] = (0, "")
    while time.monotonic() < deadline:
        last = probe(port, path)
        if last[0] == code and contains in last[1]:
            return last[1]
        time.sleep(0.3)
    raise AssertionError(f"{path} never answered {code} {contains!r} (last: {last})")


def test_a_service_waits_for_its_migration_with_the_reason_on_readyz(empty_database_url: str,
                                                                      nats_url: str) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")}
    env.update(ECHO_MEMORY_DATABASE_URL=empty_database_url, ECHO_MEMORY_NATS_URL=nats_url,
               ECHO_MEMORY_HEALTH_PORT=str(port), ECHO_MEMORY_SCHEMA_WAIT_SECONDS="0.5")
    proc = subprocess.Popen([str(BIN), "service", "causal"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # The probe answers "starting" until the first schema check has run; wait past it.
        reason = wait_probe(port, "/readyz", 503, contains="schema")
        assert "schema is at version 0" in reason and "init-db" in reason
        assert probe(port, "/healthz")[0] == 200  # alive while it waits: no restart loop
        assert proc.poll() is None
        apply_migrations(empty_database_url)  # what the migration hook Job does
        assert wait_probe(port, "/readyz", 200) == "ready"
        assert probe(port, "/nope")[0] == 404
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
