"""`echo-memory demo-seed` and `echo-memory dashboard --serve` as a user runs them, against a running stack."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys

import httpx2 as httpx
import pytest

from echo_memory.libs.local.cli.main import main
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.testing import EchoStack

pytestmark = pytest.mark.timeout(240)


def cli_env(stack: EchoStack) -> dict[str, str]:
    return {**os.environ, "ECHO_MEMORY_NATS_URL": stack.nats_url, "ECHO_MEMORY_ORG": stack.org}


async def run_cli(stack: EchoStack, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "echo_memory.libs.local.cli", *args, env=cli_env(stack),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=200)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_demo_seed_then_serve(stack: EchoStack) -> None:
    code, out, err = await run_cli(stack, "demo-seed", "--scope", "demo", "--facts", "300")
    assert code == 0, err
    facts = int(re.search(r"holds (\d+) invented fact versions", out).group(1))  # type: ignore[union-attr]
    graph = await stack.admin_call("audit", "dashboard_graph", {"scope": ["demo"]})
    assert 0 < graph["total_edges"] < facts
    search = await stack.admin_call("retrieval", "query_memory", {"query": "who owns ledger-api", "scope": "demo"})
    assert any("ledger-api" in r["text"] for r in search["results"])  # embeddings and BM25 statistics work

    again, _, err = await run_cli(stack, "demo-seed", "--scope", "demo", "--facts", "300")
    assert again == 1 and "already holds memory" in err

    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "echo_memory.libs.local.cli", "dashboard", "--serve", "--port", str(port), env=cli_env(stack),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
        url = re.search(r"open (http://127\.0\.0\.1:\d+/#token=\S+)", line)
        assert url, line
        base, secret = url.group(1).split("/#token=")
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            assert (await http.get("/api/graph")).status_code == 401
            assert (await http.post("/api/session", json={"token": secret})).status_code == 204
            shown = (await http.get("/api/graph", params={"scope": "demo"})).json()
            assert shown["total_edges"] == graph["total_edges"]
    finally:
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), timeout=30)


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboard"]) == 2
    assert "--serve" in capsys.readouterr().err
    assert main(["demo-seed", "--facts", "0"]) == 2
    assert "--facts" in capsys.readouterr().err
