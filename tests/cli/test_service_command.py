"""`echo-memory service NAME…`: the names it refuses, in one sentence, before it connects to anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("names", "said"), [
    (["edge", "writes"], "the edge runs in a process of its own"),
    (["writes", "audit", "writes"], "each service once: writes audit writes"),
    (["writes", "search"], "unknown service 'search'; choose one of writes, retrieval"),
])
def test_a_service_line_that_cannot_run_is_refused_with_exit_2(names: list[str], said: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")}
    env["ECHO_MEMORY_NATS_URL"] = "nats://127.0.0.1:9"  # never reached: the names are checked first
    done = subprocess.run([sys.executable, "-m", "echo_memory.libs.local.cli", "service", *names], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
