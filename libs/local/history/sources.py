"""The sources `echo-memory import` reads, by name, at their clients' default locations."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from echo_memory.libs.local.history import claude_code, codex, cursor, gemini, opencode, vscode
from echo_memory.libs.local.history.base import Source

SOURCE_NAMES: tuple[str, ...] = (claude_code.NAME, codex.NAME, cursor.NAME, gemini.NAME, opencode.NAME, vscode.NAME)


def build_source(name: str, home: Path, env: Mapping[str, str]) -> Source:
    """The reader of source `name` over the user's home `home`; KeyError for an unknown name."""
    e = dict(env)
    if name == claude_code.NAME:
        return claude_code.ClaudeCode(claude_code.default_root(home, e))
    if name == codex.NAME:
        return codex.Codex(codex.default_root(home, e))
    if name == cursor.NAME:
        return cursor.Cursor(cursor.default_user_dir(home, e), home / ".cursor")
    if name == gemini.NAME:
        return gemini.Gemini(gemini.default_root(home, e))
    if name == opencode.NAME:
        return opencode.OpenCode(opencode.default_root(home, e))
    if name == vscode.NAME:
        return vscode.VSCodeCopilot(vscode.default_user_dirs(home, e))
    raise KeyError(name)


def source_of_file(path: Path) -> str | None:
    """The source a transcript path belongs to, from where it lives; None when it is not recognisable."""
    text = path.as_posix()
    if "/.claude/projects/" in text or (path.suffix == ".jsonl" and "/projects/" in text and "/.cursor/" not in text):
        return claude_code.NAME
    if "/.codex/" in text or path.name.startswith("rollout-"):
        return codex.NAME
    if "/agent-transcripts/" in text:
        return cursor.NAME
    if "/.gemini/" in text or path.name.startswith("session-"):
        return gemini.NAME
    if "/chatSessions/" in text or "/emptyWindowChatSessions/" in text:
        return vscode.NAME
    return None
