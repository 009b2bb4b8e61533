"""`install --global` (every client, one diff), identities after `connect`, revocation of replaced
tokens, token file modes, project installs without machine paths or backups, and quickstart's token.

Against the running stack: tokens are issued, verified and revoked by the real writes service.
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

import pytest

from echo_memory.libs.core.config import load_settings
from echo_memory.libs.core.contracts.tokens import hash_token
from echo_memory.libs.local.cli.main import main
from echo_memory.libs.local.cli.system import QUICKSTART_TOKEN_FILE, _print_client_line
from echo_memory.libs.testing import EchoStack


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stack: EchoStack) -> Path:
    """Claude Code, Codex, Cursor, Gemini and VS Code present; the CLI pointed at the stack."""
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    (home / ".codex").mkdir()
    (home / ".gemini").mkdir()
    (home / ".config" / "Code" / "User").mkdir(parents=True)
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(json.dumps(
        {"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}}))
    (home / ".gemini" / "settings.json").write_text(json.dumps({"theme": "GitHub"}))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ECHO_MEMORY_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ECHO_MEMORY_NATS_URL", stack.nats_url)
    monkeypatch.setenv("ECHO_MEMORY_ORG", stack.org)
    monkeypatch.setenv("ECHO_MEMORY_HOME", str(tmp_path / "data"))
    return home


async def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


async def _active(stack: EchoStack) -> list[dict]:
    return [t for t in (await stack.admin_call("writes", "token_list", {}))["tokens"] if not t["revoked_at"]]


def _files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


async def test_install_global_wires_every_client_in_one_diff_and_uninstalls_exactly(
    machine: Path, stack: EchoStack, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = _files(machine)
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    code, out, err = await _cli(capsys, "install", "--global")
    assert code == 0, err
    assert out.count("Write these changes? [y/N]") == 1  # one combined diff, one question
    agents = sorted(t["agent_id"] for t in await _active(stack))
    assert agents == ["claude-code", "codex", "cursor", "gemini", "vscode"]

    claude_settings = json.loads((machine / ".claude" / "settings.json").read_text())
    assert claude_settings["model"] == "opus"
    stop = claude_settings["hooks"]["Stop"]
    assert stop[0] == {"hooks": [{"type": "command", "command": "notify-send done"}]}  # another tool's hook kept
    assert stop[1]["hooks"][0]["command"].endswith("echo-memory hook capture --client claude-code")
    assert claude_settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"].endswith(
        "hook recall --client claude-code")
    gemini = json.loads((machine / ".gemini" / "settings.json").read_text())
    assert gemini["theme"] == "GitHub" and "echo-memory" in gemini["mcpServers"]
    assert gemini["hooks"]["BeforeAgent"][0]["matcher"] == "*"
    assert gemini["hooks"]["BeforeAgent"][0]["hooks"][0]["timeout"] == 10_000  # Gemini counts milliseconds
    cursor_hooks = json.loads((machine / ".cursor" / "hooks.json").read_text())
    assert cursor_hooks["version"] == 1 and set(cursor_hooks["hooks"]) == {"sessionStart", "afterAgentResponse"}
    codex_hooks = json.loads((machine / ".codex" / "hooks.json").read_text())
    assert set(codex_hooks["hooks"]) == {"UserPromptSubmit", "Stop"}
    vscode_hooks = json.loads((machine / ".copilot" / "hooks" / "echo-memory.json").read_text())
    assert set(vscode_hooks["hooks"]) == {"SessionStart", "Stop"}
    for skill in (".claude/skills", ".agents/skills", ".cursor/skills", ".copilot/skills", ".gemini/skills"):
        text = (machine / skill / "echo-memory" / "SKILL.md").read_text()
        assert text.startswith("---\nname: echo-memory\n") and "not_stored" in text and "pending_documents" in text
    assert "Codex runs new hooks only after you trust them" in out

    # The hook's own token file, and every client file holding a token, is for the user only.
    hook_tokens = json.loads((tmp_path / "config" / "hook-tokens.json").read_text())
    assert sorted(hook_tokens["clients"]) == ["claude-code", "codex", "cursor", "gemini", "vscode"]
    for path in (tmp_path / "config" / "hook-tokens.json", machine / ".claude.json", machine / ".codex" / "config.toml",
                 machine / ".gemini" / "settings.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path

    snapshot = _files(machine)
    code, out, _ = await _cli(capsys, "install", "--global", "--yes")
    assert code == 0 and "nothing to change" in out and _files(machine) == snapshot  # idempotent
    assert len(await _active(stack)) == 5

    for client in ("claude-code", "codex", "cursor", "gemini", "vscode"):
        code, out, err = await _cli(capsys, "uninstall", "--for", client, "--yes")
        assert code == 0, err
    after = {p: b for p, b in _files(machine).items() if not p.name.endswith(".echo-memory.bak")}
    assert {p: json.loads(b) if p.suffix == ".json" else b for p, b in after.items()} == \
        {p: json.loads(b) if p.suffix == ".json" else b for p, b in before.items()}
    assert not (tmp_path / "config" / "hook-tokens.json").exists()


async def test_after_connect_each_client_keeps_its_own_identity_and_replaced_tokens_are_revoked(
    machine: Path, stack: EchoStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = await _cli(capsys, "install", "--for", "cursor", "--yes")
    assert code == 0, err
    cursor_token = json.loads((machine / ".cursor" / "mcp.json").read_text())["mcpServers"]["echo-memory"]["env"][
        "ECHO_MEMORY_TOKEN"]
    laptop = stack.issue_token("laptop")
    assert (await _cli(capsys, "connect", stack.url, laptop))[0] == 0

    for client in ("cursor", "claude-code"):
        code, out, err = await _cli(capsys, "install", "--for", client, "--yes")
        assert code == 0, err
    cursor = json.loads((machine / ".cursor" / "mcp.json").read_text())["mcpServers"]["echo-memory"]
    claude = json.loads((machine / ".claude.json").read_text())["mcpServers"]["echo-memory"]
    assert cursor["headers"]["Authorization"] == f"Bearer {cursor_token}"  # kept: the edge accepts it
    claude_token = claude["headers"]["Authorization"].removeprefix("Bearer ")
    assert claude_token not in (laptop, cursor_token)
    verified = await stack.admin_call("writes", "token_verify", {"token_hash": hash_token(claude_token)})
    assert verified["agent_id"] == "claude-code"  # its own agent, not the machine's connect token

    # An explicit token replaces Claude Code's: the replaced one stops working.
    replacement = stack.issue_token("claude-code")
    code, out, err = await _cli(capsys, "install", "--for", "claude-code", "--token", replacement, "--yes")
    assert code == 0, err
    assert "revoked" in out
    assert (await stack.admin_call("writes", "token_verify", {"token_hash": hash_token(claude_token)}))["valid"] is False
    assert (await stack.admin_call("writes", "token_verify", {"token_hash": hash_token(replacement)}))["valid"] is True


async def test_project_install_writes_no_machine_paths_and_no_backups_into_the_repository(
    machine: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    project = tmp_path / "repo"
    (project / ".git").mkdir(parents=True)
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "npx"}}}))
    (project / "AGENTS.md").write_text("# Repo notes\n")
    for client in ("claude-code", "codex", "cursor", "gemini", "vscode"):
        code, out, err = await _cli(capsys, "install", "--for", client, "--project", str(project), "--yes")
        assert code == 0, err
    text = "".join(p.read_text() for p in project.rglob("*") if p.is_file())
    for machine_path in (sys.prefix, str(machine), str(tmp_path / "data"), os.environ["ECHO_MEMORY_NATS_URL"]):
        assert machine_path not in text
    assert "em_" not in text
    assert not [p for p in project.rglob("*") if ".bak" in p.name]
    assert (tmp_path / "config" / "backups" / "repo" / ".mcp.json.echo-memory.bak").exists()
    claude = json.loads((project / ".mcp.json").read_text())["mcpServers"]["echo-memory"]
    assert claude["command"] == "echo-memory" and "env" in claude and set(claude["env"]) == {"ECHO_MEMORY_TOKEN"}
    codex = tomllib.loads((project / ".codex" / "config.toml").read_text())["mcp_servers"]["echo-memory"]
    assert codex["command"] == "echo-memory"
    hook = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    assert hook["command"] == "echo-memory hook recall --client claude-code"


async def test_an_existing_world_readable_file_that_receives_a_token_becomes_0600(
    machine: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = machine / ".cursor" / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {}}))
    config.chmod(0o644)
    code, _, err = await _cli(capsys, "install", "--for", "cursor", "--yes", "--no-hooks")
    assert code == 0, err
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    backup = config.with_name("mcp.json.echo-memory.bak")
    assert stat.S_IMODE(backup.stat().st_mode) == 0o644  # its content held no token
    code, _, err = await _cli(capsys, "install", "--for", "cursor", "--yes", "--no-hooks",
                              "--token", "em_" + os.environ["ECHO_MEMORY_ORG"] + "_" + "B" * 43)
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600  # now the backup holds the earlier token


async def test_quickstart_prints_the_user_scoped_line_and_reuses_its_token(
    machine: Path, stack: EchoStack, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    settings = load_settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    assert await asyncio.to_thread(_print_client_line, settings, stack.url) == 0
    first = capsys.readouterr().out
    assert f"claude mcp add --scope user --transport http echo-memory {stack.url} --header" in first
    assert "echo-memory install --global" in first
    assert await asyncio.to_thread(_print_client_line, settings, stack.url) == 0
    second = capsys.readouterr().out
    assert "kept from an earlier start" in second
    token = first.split("Bearer ")[1].split('"')[0]
    assert token in second and len(await _active(stack)) == 1
    saved = settings.home / QUICKSTART_TOKEN_FILE
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600

    await stack.admin_call("writes", "token_revoke", {"agent_id": "claude-code"})
    assert await asyncio.to_thread(_print_client_line, settings, stack.url) == 0
    third = capsys.readouterr().out
    assert "kept" not in third and token not in third and len(await _active(stack)) == 1
