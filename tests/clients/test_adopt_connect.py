"""`adopt` and `connect` against the running stack: real tokens over the bus, real MCP afterwards.

The CLI runs in a worker thread (it starts its own event loop, as on a terminal) while the
stack serves in the test's loop.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat
import sys
import tomllib
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters

from echo_memory.libs.core.contracts.tokens import hash_token
from echo_memory.libs.local.cli.main import main
from echo_memory.libs.local.stack import tool_error
from echo_memory.libs.testing import EchoStack

INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stack: EchoStack) -> Path:
    """A home directory with Claude Code, Cursor and Codex configured, and the CLI pointed at the stack."""
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    (home / ".codex").mkdir()
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}, "numStartups": 3}))
    (home / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
    (home / ".codex" / "config.toml").write_text('model = "gpt-5"\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ECHO_MEMORY_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ECHO_MEMORY_NATS_URL", stack.nats_url)
    monkeypatch.setenv("ECHO_MEMORY_ORG", stack.org)
    return home


async def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


async def _tokens(stack: EchoStack) -> list[dict]:
    return [t for t in (await stack.admin_call("writes", "token_list", {}))["tokens"] if not t["revoked_at"]]


async def _status(url: str, token: str) -> int:
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(timeout=10) as http:
        return (await http.post(url, json=INIT, headers=headers)).status_code


async def test_adopt_gives_every_found_client_its_own_agent_and_token(
    machine: Path, stack: EchoStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await _cli(capsys, "adopt", "--yes")
    assert code == 0, err
    for label in ("Claude Code: agent 'claude-code' (new token)", "Cursor: agent 'cursor' (new token)",
                  "Codex: agent 'codex' (new token)"):
        assert label in out
    assert "Claude Desktop" not in out and "VS Code" not in out  # not installed on this machine
    claude = json.loads((machine / ".claude.json").read_text())
    assert claude["numStartups"] == 3 and "other" in claude["mcpServers"]
    entries = {
        "claude-code": claude["mcpServers"]["echo-memory"],
        "cursor": json.loads((machine / ".cursor" / "mcp.json").read_text())["mcpServers"]["echo-memory"],
        "codex": tomllib.loads((machine / ".codex" / "config.toml").read_text())["mcp_servers"]["echo-memory"],
    }
    tokens = {name: e["env"]["ECHO_MEMORY_TOKEN"] for name, e in entries.items()}
    assert len(set(tokens.values())) == 3
    assert sorted(t["agent_id"] for t in await _tokens(stack)) == ["claude-code", "codex", "cursor"]
    assert entries["cursor"]["env"]["ECHO_MEMORY_NATS_URL"] == stack.nats_url

    # The written stdio entry works as the client would launch it, under the client's own agent id.
    cursor = entries["cursor"]
    env = {"PATH": os.environ["PATH"], **cursor["env"]}
    async with Client(StdioServerParameters(command=cursor["command"], args=cursor["args"], env=env)) as client:
        written = await client.call_tool("write_episode", {
            "session_id": "s", "entities": [{"name": "Adopt", "type": "command"}, {"name": "Cursor", "type": "tool"}],
            "facts": [{"source": "Adopt", "target": "Cursor", "relation": "configures",
                       "fact": "echo-memory adopt configures Cursor.", "confidence": "extracted"}],
        })
        recalled = await client.call_tool("query_memory", {"query": "what configures Cursor?"})
    assert not written.is_error, written.content
    assert recalled.structured_content["results"][0]["provenance"]["agent_id"] == "cursor"

    snapshot = {p: p.read_bytes() for p in machine.rglob("*") if p.is_file()}
    code, out, _ = await _cli(capsys, "adopt", "--yes")
    assert code == 0 and "nothing to change" in out and out.count("keeps its token") == 3
    assert {p: p.read_bytes() for p in machine.rglob("*") if p.is_file()} == snapshot
    assert len(await _tokens(stack)) == 3


async def test_a_declined_adopt_writes_nothing_and_revokes_the_tokens_it_issued(
    machine: Path, stack: EchoStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = {p: p.read_bytes() for p in machine.rglob("*") if p.is_file()}
    monkeypatch.setattr(sys, "stdin", io.StringIO("no\n"))
    code, out, _ = await _cli(capsys, "adopt")
    assert code == 1 and "nothing was written" in out
    assert {p: p.read_bytes() for p in machine.rglob("*") if p.is_file()} == before
    assert await _tokens(stack) == []


async def test_connect_points_clients_at_a_remote_edge_and_back(
    machine: Path, stack: EchoStack, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    token = stack.issue_token("laptop-2")
    code, _, err = await _cli(capsys, "connect", stack.url, token[:-2] + "zz")
    assert code == 1 and "refused the token" in err
    assert not (tmp_path / "config" / "remote.json").exists()

    code, out, err = await _cli(capsys, "connect", stack.url, token)
    assert code == 0, err
    saved = tmp_path / "config" / "remote.json"
    assert json.loads(saved.read_text()) == {"url": stack.url, "token": token}
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600

    desktop = machine / ".config" / "Claude"
    desktop.mkdir(parents=True)
    assert (await _cli(capsys, "install", "--for", "claude-code", "--yes"))[0] == 0
    assert (await _cli(capsys, "install", "--for", "claude-desktop", "--yes"))[0] == 0
    entry = json.loads((machine / ".claude.json").read_text())["mcpServers"]["echo-memory"]
    own = entry["headers"]["Authorization"].removeprefix("Bearer ")
    assert entry == {"type": "http", "url": stack.url, "headers": {"Authorization": f"Bearer {own}"}}
    assert own != token  # each client writes as itself, never as the machine's connect token
    assert (await stack.admin_call("writes", "token_verify", {"token_hash": hash_token(own)}))["agent_id"] == "claude-code"
    assert await _status(entry["url"], own) == 200
    bridge = json.loads((desktop / "claude_desktop_config.json").read_text())["mcpServers"]["echo-memory"]
    desktop_token = bridge["env"]["ECHO_MEMORY_TOKEN"]
    assert bridge["args"] == ["bridge"] and desktop_token not in (token, own)
    desktop = await stack.admin_call("writes", "token_verify", {"token_hash": hash_token(desktop_token)})
    assert desktop["agent_id"] == "claude-desktop"

    # Claude Desktop's command reaches the remote edge through the stdio bridge.
    env = {"PATH": os.environ["PATH"], "HOME": str(machine), "ECHO_MEMORY_CONFIG_DIR": str(tmp_path / "config"),
           **bridge["env"]}
    async with Client(StdioServerParameters(command=bridge["command"], args=bridge["args"], env=env)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("query_memory", {"query": "anything at all"})
        refused = await client.call_tool("query_memory", {"query": "x", "top_k": 0})
    assert len(tools) == 10
    assert not result.is_error and result.content[0].text.startswith("<echo-memory-recall>")
    assert refused.is_error and tool_error(refused)["code"] == "invalid_argument"

    code, out, _ = await _cli(capsys, "connect", "--local")
    assert code == 0 and not saved.exists()
    assert not saved.with_name("remote.json.echo-memory.bak").exists()
    code, out, err = await _cli(capsys, "install", "--for", "claude-code", "--token", token, "--yes")
    assert code == 0, err
    entry = json.loads((machine / ".claude.json").read_text())["mcpServers"]["echo-memory"]
    assert entry["type"] == "stdio" and entry["args"] == ["mcp"]


async def test_connect_refuses_plain_http_to_another_host_and_non_tokens(
    machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = await _cli(capsys, "connect", "http://memory.example.com/mcp", "em_acme_" + "x" * 40)
    assert code == 1 and "https" in err
    code, _, err = await _cli(capsys, "connect", "https://memory.example.com/mcp", "sk-not-ours")
    assert code == 1 and "not an Echo Memory token" in err


async def test_an_install_that_cannot_plan_revokes_the_token_it_issued(
    machine: Path, stack: EchoStack, capsys: pytest.CaptureFixture[str]
) -> None:
    config = machine / ".cursor" / "mcp.json"
    broken = '{"mcpServers": {"other": {"command": "x",}}\n'
    config.write_text(broken)
    code, _, err = await _cli(capsys, "install", "--for", "cursor")
    assert code == 1 and "not valid JSON" in err
    assert config.read_text() == broken
    assert await _tokens(stack) == []  # the token issued before the plan failed does not linger
