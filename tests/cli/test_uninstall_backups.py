"""After `uninstall`, no file it leaves behind holds the client's token: not the config files, and
not the backups it wrote (real CLI entry point; HOME and the config dirs in a temp directory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from echo_memory.libs.local.cli.main import main
from echo_memory.libs.local.clients import CLIENTS

TOKEN = "em_local_" + "B" * 43


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ECHO_MEMORY_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ECHO_MEMORY_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("ECHO_MEMORY_TOKEN", raising=False)
    return home


def holding(root: Path, secret: str) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and secret in p.read_text(errors="replace"))


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_uninstall_leaves_no_file_or_backup_holding_the_token(
    home: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    root = home.parent
    assert main(["install", "--for", name, "--token", TOKEN, "--yes"]) == 0, capsys.readouterr()
    assert holding(root, TOKEN)  # installed: the client's files hold it
    assert main(["install", "--for", name, "--token", TOKEN, "--yes"]) == 0  # run twice, as users do
    assert main(["uninstall", "--for", name, "--yes"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "backup" in out  # it did back files up
    assert holding(root, TOKEN) == []


def test_hooks_uninstall_masks_the_token_in_its_backups(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["install", "--for", "claude-code", "--token", TOKEN, "--yes"]) == 0
    before = [p for p in holding(home.parent, TOKEN) if "hook" in p.name]
    assert before, holding(home.parent, TOKEN)  # the hook's credentials hold the token
    assert main(["hooks", "uninstall", "--for", "claude-code", "--yes"]) == 0, capsys.readouterr()
    assert "tokens masked" in capsys.readouterr().out
    assert [p for p in holding(home.parent, TOKEN) if p.name.endswith(".bak")] == []
