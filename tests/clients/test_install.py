"""`echo-memory install/uninstall --for …` against fixture config files of every client.

Runs the real CLI entry point with HOME and the user config dir pointed at a temp directory.
"""

from __future__ import annotations

import io
import json
import sys
import tomllib
from pathlib import Path

import pytest

from echo_memory.libs.local.cli.main import main
from echo_memory.libs.local.clients import CLIENTS

TOKEN = "em_local_" + "A" * 43
OTHER_JSON = {"command": "npx", "args": ["-y", "@acme/other-server"], "env": {"ACME": "1"}}
CODEX_BEFORE = """\
# my codex settings
model = "gpt-5"

[mcp_servers.other]
command = "npx"
args = ["-y", "@acme/other-server"]
"""
NOTES = "# My notes\n\nAlways run the linter.\n"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ECHO_MEMORY_CONFIG_DIR", str(tmp_path / "config"))
    return home


def _desktop(home: Path) -> Path:
    base = home / "Library/Application Support/Claude" if sys.platform == "darwin" else home / ".config/Claude"
    return base / "claude_desktop_config.json"


def _vscode(home: Path) -> Path:
    base = home / "Library/Application Support/Code/User" if sys.platform == "darwin" else home / ".config/Code/User"
    return base / "mcp.json"


# client -> (config file, root key, instructions file or None)
def _layout(home: Path) -> dict[str, tuple[Path, str, Path | None]]:
    return {
        "claude-code": (home / ".claude.json", "mcpServers", home / ".claude" / "CLAUDE.md"),
        "cursor": (home / ".cursor" / "mcp.json", "mcpServers", None),
        "codex": (home / ".codex" / "config.toml", "", home / ".codex" / "AGENTS.md"),
        "claude-desktop": (_desktop(home), "mcpServers", None),
        "vscode": (_vscode(home), "servers", None),
        "gemini": (home / ".gemini" / "settings.json", "mcpServers", home / ".gemini" / "GEMINI.md"),
    }


def _seed(path: Path, root: str, notes: Path | None) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    if root:
        text = json.dumps({"theme": "dark", root: {"other": OTHER_JSON}}, indent=2) + "\n"
    else:
        text = CODEX_BEFORE
    path.write_text(text)
    if notes is not None:
        notes.parent.mkdir(parents=True, exist_ok=True)
        notes.write_text(NOTES)
    return text


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _servers(path: Path, root: str) -> dict:
    if root:
        return json.loads(path.read_text())[root]
    return tomllib.loads(path.read_text())["mcp_servers"]


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_install_keeps_other_servers_backs_up_is_idempotent_and_uninstalls_exactly(
    home: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    config, root, notes = _layout(home)[name]
    original = _seed(config, root, notes)

    code, out, _ = _run(capsys, "install", "--for", name, "--token", TOKEN, "--yes")
    assert code == 0, out
    assert TOKEN not in out and "em_local_AAAA…" in out  # the diff never shows the secret
    servers = _servers(config, root)
    assert servers["other"]["args"] == OTHER_JSON["args"]  # existing server kept
    entry = servers["echo-memory"]
    assert entry["args"] == ["mcp"] and Path(entry["command"]).name == "echo-memory"
    assert entry["env"]["ECHO_MEMORY_TOKEN"] == TOKEN
    if root:
        assert json.loads(config.read_text())["theme"] == "dark"
    else:
        assert tomllib.loads(config.read_text())["model"] == "gpt-5"
        assert config.read_text().startswith(CODEX_BEFORE)  # the user's text is untouched, ours appended
    backup = config.with_name(config.name + ".echo-memory.bak")
    assert backup.read_text() == original
    if notes is not None:
        text = notes.read_text()
        assert text.startswith(NOTES) and "query_memory" in text and "write_episode" in text

    snapshot = config.read_text(), (notes.read_text() if notes else None)
    code, out, _ = _run(capsys, "install", "--for", name, "--yes")  # second run: the token is reused
    assert code == 0 and "nothing to change" in out
    assert (config.read_text(), notes.read_text() if notes else None) == snapshot

    code, out, _ = _run(capsys, "uninstall", "--for", name, "--yes")
    assert code == 0, out
    if root:
        assert json.loads(config.read_text()) == json.loads(original)
    else:
        assert config.read_text() == original
    if notes is not None:
        assert notes.read_text() == NOTES
    code, out, _ = _run(capsys, "uninstall", "--for", name, "--yes")
    assert code == 0 and "nothing to change" in out


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_an_invalid_config_file_is_refused_untouched(
    home: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    config, root, _ = _layout(home)[name]
    config.parent.mkdir(parents=True, exist_ok=True)
    broken = '{"mcpServers": {"other": {"command": "x",}}\n' if root else "[mcp_servers.other\ncommand = 'x'\n"
    config.write_text(broken)
    code, out, err = _run(capsys, "install", "--for", name, "--token", TOKEN, "--yes")
    assert code == 1
    assert str(config) in err and ("not valid JSON" in err or "not valid TOML" in err)
    assert "nothing was changed" in err
    assert config.read_text() == broken
    assert not config.with_name(config.name + ".echo-memory.bak").exists()
    assert sorted(p.name for p in config.parent.iterdir()) == [config.name]


def test_install_asks_first_and_writes_nothing_when_declined(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, root, notes = _layout(home)["claude-code"]
    original = _seed(config, root, notes)
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    code, out, _ = _run(capsys, "install", "--for", "claude-code", "--token", TOKEN)
    assert code == 1 and "Write these changes? [y/N]" in out and "nothing was written" in out
    assert "+    \"echo-memory\": {" in out  # the diff was shown
    assert config.read_text() == original and notes is not None and notes.read_text() == NOTES

    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    code, out, _ = _run(capsys, "install", "--for", "claude-code", "--token", TOKEN)
    assert code == 0 and "echo-memory" in _servers(config, root)


def test_an_entry_not_written_by_install_is_not_taken_over(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    text = '[mcp_servers.echo-memory]\ncommand = "my-own-wrapper"\n'
    config.write_text(text)
    code, _, err = _run(capsys, "install", "--for", "codex", "--token", TOKEN, "--yes")
    assert code == 1 and "did not write" in err and config.read_text() == text


def test_project_install_references_the_token_from_the_environment(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    (project / "AGENTS.md").write_text(NOTES)
    for name in ("claude-code", "cursor", "codex", "vscode"):
        code, out, err = _run(capsys, "install", "--for", name, "--project", str(project), "--yes")
        assert code == 0, err
        assert "ECHO_MEMORY_TOKEN set in the environment that starts the client" in out
        assert "the `echo-memory` command on the client's PATH" in out
    claude = json.loads((project / ".mcp.json").read_text())["mcpServers"]["echo-memory"]
    assert claude["type"] == "stdio" and claude["env"]["ECHO_MEMORY_TOKEN"] == "${ECHO_MEMORY_TOKEN}"
    cursor = json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]["echo-memory"]
    assert cursor["env"]["ECHO_MEMORY_TOKEN"] == "${env:ECHO_MEMORY_TOKEN}"
    vscode = json.loads((project / ".vscode" / "mcp.json").read_text())["servers"]["echo-memory"]
    assert vscode["type"] == "stdio" and vscode["env"]["ECHO_MEMORY_TOKEN"] == "${env:ECHO_MEMORY_TOKEN}"
    codex = tomllib.loads((project / ".codex" / "config.toml").read_text())["mcp_servers"]["echo-memory"]
    assert codex["env_vars"] == ["ECHO_MEMORY_TOKEN"] and "env" not in codex
    assert "em_" not in "".join(p.read_text() for p in project.rglob("*") if p.is_file())
    rule = (project / ".cursor" / "rules" / "echo-memory.mdc").read_text()
    assert rule.startswith("---\n") and "alwaysApply: true" in rule
    assert (project / ".github" / "instructions" / "echo-memory.instructions.md").read_text().startswith("---\napplyTo:")
    assert (project / "CLAUDE.md").exists() and (project / "AGENTS.md").read_text().startswith(NOTES)

    for name in ("claude-code", "cursor", "codex", "vscode"):
        assert _run(capsys, "uninstall", "--for", name, "--project", str(project), "--yes")[0] == 0
    left = sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file() and ".bak" not in p.name)
    assert left == ["AGENTS.md"] and (project / "AGENTS.md").read_text() == NOTES


def test_claude_desktop_has_no_project_config(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "install", "--for", "claude-desktop", "--project", str(tmp_path), "--yes")
    assert code == 1 and "--global" in err


def test_a_project_install_beside_a_global_one_adds_no_second_entry_or_hook(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code merges user and project settings: the same server name in both is a scope conflict,
    and a second recall hook would fire beside the first."""
    project = tmp_path / "repo"
    project.mkdir()
    code, _, err = _run(capsys, "install", "--for", "claude-code", "--global", "--token", TOKEN, "--yes")
    assert code == 0, err
    assert "echo-memory" in _servers(home / ".claude.json", "mcpServers")
    assert "hook recall --client claude-code" in (home / ".claude" / "settings.json").read_text()

    code, out, err = _run(capsys, "install", "--for", "claude-code", "--project", str(project), "--yes")
    assert code == 0, err
    assert not (project / ".mcp.json").exists()
    assert not (project / ".claude" / "settings.json").exists()
    assert "adds no second entry to .mcp.json" in out and "no second hook added" in out
    assert (project / "CLAUDE.md").exists()  # instructions and the skill still go to the project

    # Without a global install the project gets both, and says what it needs.
    other = tmp_path / "other-home"
    other.mkdir()
    fresh = tmp_path / "repo2"
    fresh.mkdir()
    monkeypatch.setenv("HOME", str(other))
    code, out, err = _run(capsys, "install", "--for", "claude-code", "--project", str(fresh), "--yes")
    assert code == 0, err
    assert "echo-memory" in _servers(fresh / ".mcp.json", "mcpServers")
    assert "hook recall --client claude-code" in (fresh / ".claude" / "settings.json").read_text()
    assert "export ECHO_MEMORY_TOKEN=" in out


def test_a_global_install_run_inside_a_project_install_says_the_name_is_in_two_scopes(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    assert _run(capsys, "install", "--for", "claude-code", "--project", str(project), "--yes")[0] == 0
    monkeypatch.chdir(project)
    code, out, err = _run(capsys, "install", "--for", "claude-code", "--global", "--token", TOKEN, "--yes")
    assert code == 0, err
    assert "also has echo-memory (a project install)" in out and "uninstall --for claude-code --project ." in out
    monkeypatch.chdir(tmp_path)  # elsewhere: nothing to say
    code, out, _ = _run(capsys, "install", "--for", "claude-code", "--global", "--token", TOKEN, "--yes")
    assert code == 0 and "two scopes" not in out
