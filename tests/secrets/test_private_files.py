"""Files the product writes that hold memory or tokens are created readable by their owner only."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from echo_memory.libs.local.private_files import make_private, open_private_append, open_private_text
from echo_memory.libs.local.supervisor.nats import NatsServer
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.local.supervisor.units import ServiceProcess
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import PAYMENTS, call

ROOT = Path(__file__).resolve().parents[2]


async def cli(*args: str, org: str, nats_url: str) -> tuple[int, str, str]:
    """The real echo-memory command as a child process, against the test stack's bus."""
    env = {**os.environ, "ECHO_MEMORY_NATS_URL": nats_url, "ECHO_MEMORY_ORG": org}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "echo_memory.libs.local.cli", *args, env=env,
                                                cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_an_export_file_is_readable_by_its_owner_only(stack: EchoStack, tmp_path: Path) -> None:
    async with stack.client(stack.issue_token("claude-code")) as client:
        is_error, _ = await call(client, "write_episode", PAYMENTS)
    assert not is_error
    file = tmp_path / "org.jsonl"
    old_umask = os.umask(0o022)  # the usual umask: a plain open() would give 0644
    try:
        code, _, err = await cli("export", "--out", str(file), org=stack.org, nats_url=stack.nats_url)
    finally:
        os.umask(old_umask)
    assert code == 0, err
    assert "Stripe" in file.read_text()  # the file holds memory
    assert mode(file) == 0o600


def test_an_existing_file_is_narrowed_when_written_or_appended(tmp_path: Path) -> None:
    for opener in (lambda p: open_private_text(p, "w"), lambda p: open_private_text(p, "a"), open_private_append,
                   make_private):
        path = tmp_path / "f"
        path.write_text("old\n")
        path.chmod(0o644)
        handle: Any = opener(path)
        if handle is not None:
            handle.close()
        assert mode(path) == 0o600, opener
    with open_private_text(tmp_path / "f", "a") as handle:
        handle.write("new\n")
    assert (tmp_path / "f").read_text() == "old\nnew\n"
    with open_private_text(tmp_path / "f", "w") as handle:
        handle.write("only\n")
    assert (tmp_path / "f").read_text() == "only\n"


def test_the_nats_and_service_logs_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    nats = NatsServer(tmp_path / "nats", free_port())
    nats.start()
    try:
        log = tmp_path / "nats" / "nats.log"
        assert log.stat().st_size > 0  # nats-server wrote into the file it found
        assert mode(log) == 0o600
    finally:
        nats.stop()
    service_log = tmp_path / "unknown.log"
    unit = ServiceProcess("no-such-service", {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, service_log)
    unit.launch()
    deadline = time.monotonic() + 60
    while unit.exit_code() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert unit.exit_code() not in (None, 0)
    assert b"no-such-service" in service_log.read_bytes()
    assert mode(service_log) == 0o600


def test_the_postgres_log_is_readable_by_its_owner_only(pg: Any) -> None:
    log: Path = pg.server.log
    assert log.stat().st_size > 0
    assert mode(log) == 0o600


def test_the_hook_log_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """The recall hook fails open on an unreachable edge and says so in its log, created 0600."""
    payload = {"session_id": "s", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
               "prompt": "Which database does the billing service use?"}
    env = {**os.environ, "ECHO_MEMORY_CONFIG_DIR": str(tmp_path), "ECHO_MEMORY_TOKEN": "em_t_" + "x" * 43}
    (tmp_path / "remote.json").write_text(json.dumps({"url": "http://127.0.0.1:9/mcp", "token": "unused"}))
    argv = [sys.executable, "-m", "echo_memory.libs.local.cli", "hook", "recall", "--client", "codex"]
    old_umask = os.umask(0o022)
    try:
        done = subprocess.run(argv, input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=60)
    finally:
        os.umask(old_umask)
    assert done.returncode == 0, done.stderr
    log = tmp_path / "hooks.log"
    assert "cannot be reached" in log.read_text()
    assert mode(log) == 0o600
