"""A stdio session (`echo-memory mcp`) whose client leaves while the system is down exits quietly.

Real processes: `up --detach`, a token, `echo-memory mcp` spoken to in MCP's newline-delimited
JSON-RPC, `down`, a tool call answered `unavailable`, then the client closes stdin.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from echo_memory.libs.testing import server_dir

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent / "echo-memory"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")}
    env.update(ECHO_MEMORY_HOME=str(home), **extra)
    return env


def cli(home: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN), *args], env=_env(home), capture_output=True, text=True, timeout=timeout)


class Session:
    """One `echo-memory mcp` process and the JSON-RPC a client sends it."""

    def __init__(self, home: Path, token: str) -> None:
        self.process = subprocess.Popen([str(BIN), "mcp"], env=_env(home, ECHO_MEMORY_TOKEN=token),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        self.next_id = 1

    def send(self, method: str, params: dict[str, Any] | None = None, *, notify: bool = False) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            message["id"] = self.next_id
            self.next_id += 1
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        if notify:
            return {}
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        assert answer.get("id") == message["id"], answer
        return answer


def test_a_stdio_session_closed_while_the_system_is_down_exits_quietly() -> None:
    home = server_dir("stdio-quiet")
    try:
        assert cli(home, "up", "--detach").returncode == 0
        created = cli(home, "token", "create", "--agent", "stdio-probe", timeout=60)
        token = re.search(r"\bem_\S+", created.stdout)
        assert created.returncode == 0 and token, created.stdout + created.stderr
        session = Session(home, token.group(0))
        session.send("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "probe", "version": "0"}})
        session.send("notifications/initialized", notify=True)
        assert "query_memory" in json.dumps(session.send("tools/list"))
        assert cli(home, "down", timeout=90).returncode == 0
        down = session.send("tools/call", {"name": "query_memory", "arguments": {"query": "anything?"}})
        assert down["result"]["isError"] is True and "unavailable" in json.dumps(down["result"]), down
        assert session.process.stdin is not None
        session.process.stdin.close()  # the client leaves
        started = time.monotonic()
        code = session.process.wait(timeout=60)
        assert session.process.stderr is not None
        stderr = session.process.stderr.read()
        assert code == 0, stderr
        assert "Traceback" not in stderr and stderr.strip() == "", stderr
        assert time.monotonic() - started < 15
    finally:
        cli(home, "down", timeout=90)
        shutil.rmtree(home, ignore_errors=True)
