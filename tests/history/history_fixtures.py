"""Lay the fixture histories out as a user's home: every client's files where that client keeps them.

Fixture files name the project directory `@REPO@` (and Cursor's project folder `@SLUG@`); they
become a real git repository under the temporary home, so project detection is exercised too.
The two client databases are kept as SQL text and built into SQLite files here.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
SOURCES = ("claude-code", "codex", "cursor", "gemini-cli", "opencode", "vscode-copilot")

# complete turns and turns still waiting for their reply, per source, as the fixtures hold them
EXPECTED = {
    "claude-code": (4, 1),
    "codex": (3, 1),
    "cursor": (4, 2),
    "gemini-cli": (3, 1),
    "opencode": (3, 1),
    "vscode-copilot": (3, 1),
}


def make_repo(home: Path) -> Path:
    repo = home / "work" / "app"
    (repo / ".git").mkdir(parents=True, exist_ok=True)
    (repo / "src").mkdir(exist_ok=True)
    (repo / "libs").mkdir(exist_ok=True)
    return repo


def cursor_slug(repo: Path) -> str:
    return "-".join(p for p in repo.parts if p not in ("/", ""))


def install(home: Path, sources: tuple[str, ...] = SOURCES) -> Path:
    """Copy the fixtures of `sources` into `home`; returns the project repository's path."""
    repo = make_repo(home)
    for source in sources:
        root = FIXTURES / source
        for path in root.rglob("*"):
            if path.is_dir() or path.suffix == ".sql":
                continue
            rel = Path(str(path.relative_to(root)).replace("@SLUG@", cursor_slug(repo)))
            target = home / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.name == ".project_root" or path.suffix in (".jsonl", ".json"):
                target.write_text(path.read_text(encoding="utf-8").replace("@REPO@", str(repo)), encoding="utf-8")
            else:
                shutil.copy(path, target)
    if "opencode" in sources:
        build_db(FIXTURES / "opencode" / "opencode.sql", home / ".local" / "share" / "opencode" / "opencode.db", repo)
    if "cursor" in sources:
        build_db(FIXTURES / "cursor" / "state.sql",
                 home / ".config" / "Cursor" / "User" / "globalStorage" / "state.vscdb", repo)
    return repo


def build_db(sql: Path, target: Path, repo: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    conn = sqlite3.connect(target)
    try:
        conn.executescript(sql.read_text(encoding="utf-8").replace("@REPO@", str(repo)))
        conn.commit()
    finally:
        conn.close()
