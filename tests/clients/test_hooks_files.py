"""`hooks install|show|uninstall --project`: merged beside other tools' hooks, idempotent, exact removal.

Project hook files name the command on PATH and need no token (the hook reads $ECHO_MEMORY_TOKEN),
so these run without a system.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_memory.libs.local.cli.main import main

OTHERS = {
    "claude-code": (".claude/settings.json", {"permissions": {"allow": ["Bash(ls)"]}, "hooks": {"UserPromptSubmit": [
        {"hooks": [{"type": "command", "command": "other-tool inject", "timeout": 5}]}]}}),
    "codex": (".codex/hooks.json", {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}),
    "gemini": (".gemini/settings.json", {"mcpServers": {"x": {"command": "x"}}, "hooks": {"BeforeAgent": [
        {"matcher": "*", "hooks": [{"type": "command", "command": "lint-prompt", "name": "lint"}]}]}}),
    "cursor": (".cursor/hooks.json", {"version": 1, "hooks": {"afterAgentResponse": [{"command": "./audit.sh"}],
                                                             "beforeShellExecution": [{"command": "./guard.sh"}]}}),
    "vscode": (".github/hooks/team.json", {"hooks": {"Stop": [{"type": "command", "command": "notify"}]}}),
}
WRITTEN = {"claude-code": ".claude/settings.json", "codex": ".codex/hooks.json", "gemini": ".gemini/settings.json",
           "cursor": ".cursor/hooks.json", "vscode": ".github/hooks/echo-memory.json"}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ECHO_MEMORY_CONFIG_DIR", str(tmp_path / "config"))
    repo = tmp_path / "repo"
    for rel, data in OTHERS.values():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(json.dumps(data, indent=2) + "\n")
    return repo


@pytest.mark.parametrize("client", sorted(OTHERS))
def test_hooks_merge_beside_other_tools_and_uninstall_exactly(
    project: Path, capsys: pytest.CaptureFixture[str], client: str
) -> None:
    before = {p: p.read_text() for p in project.rglob("*") if p.is_file()}
    assert main(["hooks", "install", "--for", client, "--project", str(project), "--yes"]) == 0
    written = json.loads((project / WRITTEN[client]).read_text())
    text = json.dumps(written)
    assert f'"echo-memory hook recall --client {client}"' in text
    assert f'"echo-memory hook capture --client {client}"' in text
    rel, other = OTHERS[client]
    if rel == WRITTEN[client]:
        for event, entries in other["hooks"].items():
            assert written["hooks"][event][0] == entries[0]  # the other tool's handler kept, first
        for key in other:
            if key != "hooks":
                assert written[key] == other[key]
    capsys.readouterr()

    assert main(["hooks", "show", "--for", client, "--project", str(project)]) == 0
    assert "installed and up to date" in capsys.readouterr().out
    snapshot = {p: p.read_text() for p in project.rglob("*") if p.is_file()}
    assert main(["hooks", "install", "--for", client, "--project", str(project), "--yes"]) == 0
    assert "nothing to change" in capsys.readouterr().out
    assert {p: p.read_text() for p in project.rglob("*") if p.is_file()} == snapshot

    assert main(["hooks", "uninstall", "--for", client, "--project", str(project), "--yes"]) == 0
    after = {p: p.read_text() for p in project.rglob("*") if p.is_file()}
    assert {p: json.loads(t) for p, t in after.items()} == {p: json.loads(t) for p, t in before.items()}


def test_a_hook_file_with_a_wrong_shape_is_refused_untouched(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = project / ".codex" / "hooks.json"
    path.write_text('{"hooks": {"Stop": "not a list"}}\n')
    assert main(["hooks", "install", "--for", "codex", "--project", str(project), "--yes"]) == 1
    assert "hooks.Stop is not a list" in capsys.readouterr().err
    assert path.read_text() == '{"hooks": {"Stop": "not a list"}}\n'
