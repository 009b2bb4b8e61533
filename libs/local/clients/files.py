"""Safe edits of other programs' config files: plan, show a diff, back up, write atomically.

Nothing here decides *what* to write (see `clients.py`); this module makes sure a write never
breaks a file: JSON and TOML are parsed before and after the edit, an unparsable file is refused
untouched, and every write goes to a temporary file that replaces the original in one rename.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BACKUP_SUFFIX = ".echo-memory.bak"
_TOKEN_RE = re.compile(r"(em_[a-z0-9-]+_)[A-Za-z0-9_-]{8,}")


class ConfigError(Exception):
    """A config file cannot be edited safely (invalid JSON/TOML, or an entry we did not write)."""


@dataclass(frozen=True)
class FileChange:
    """One file before and after; `None` means the file does not exist (or will be removed)."""

    path: Path
    before: str | None
    after: str | None
    what: str = ""  # a short note shown above the diff: which client and what changes
    prune_empty_dir: bool = False  # removing the file also removes its directory when that is left empty

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff with every token shown only by its prefix."""
        old = self.before.splitlines(keepends=True) if self.before is not None else []
        new = self.after.splitlines(keepends=True) if self.after is not None else []
        text = "".join(
            difflib.unified_diff(
                old, new,
                fromfile=str(self.path) if self.before is not None else "/dev/null",
                tofile=str(self.path) if self.after is not None else "/dev/null",
            )
        )
        if text and not text.endswith("\n"):
            text += "\n"
        return mask_tokens(text)


def mask_tokens(text: str) -> str:
    """`text` with every Echo Memory token cut to its non-secret prefix."""
    return _TOKEN_RE.sub(lambda m: m.group(1) + m.group(0)[len(m.group(1)) : len(m.group(1)) + 4] + "…", text)


def read_text(path: Path) -> str | None:
    """The file's text, or None when it does not exist."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def load_json(path: Path, text: str | None) -> dict[str, Any]:
    """The JSON object in `text` ({} for a missing or blank file).

    Raises:
        ConfigError: the file is not a JSON object; the message says where it is broken.
    """
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
            "fix it and run again — nothing was changed"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds JSON but not an object; nothing was changed")
    return data


def dump_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def check_toml(path: Path, text: str | None, *, after_edit: bool = False) -> dict[str, Any]:
    """The parsed TOML document ({} for a missing file).

    Raises:
        ConfigError: the file (or, with `after_edit`, our edit of it) is not valid TOML.
    """
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        if after_edit:
            raise ConfigError(
                f"adding our table to {path} would make it invalid TOML ({exc}); it may define "
                "mcp_servers as an inline table — nothing was changed"
            ) from None
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix it and run again — nothing was changed") from None


def toml_value(value: Any) -> str:
    """A TOML literal for a string, bool, number, list or dict of those (inline table)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def upsert_block(text: str | None, begin: str, end: str, body: str) -> str:
    """`text` with the block between the `begin` and `end` marker lines set to `body`.

    An existing block is replaced in place; otherwise the block is appended after a blank line.
    """
    block = f"{begin}\n{body.rstrip()}\n{end}"
    if text:
        span = _block_span(text, begin, end)
        if span is not None:
            return text[: span[0]] + block + text[span[1] :]
        return text + ("" if text.endswith("\n") else "\n") + "\n" + block + "\n"
    return block + "\n"


def remove_block(text: str | None, begin: str, end: str) -> str | None:
    """`text` without our marked block and the blank line install put before it.

    Returns None when nothing else is left (install created the file), and `text` unchanged
    when there is no block.
    """
    if text is None:
        return None
    span = _block_span(text, begin, end)
    if span is None:
        return text
    start, stop = span
    if text[stop : stop + 1] == "\n":
        stop += 1
    if text[max(0, start - 2) : start] == "\n\n":
        start -= 1
    rest = text[:start] + text[stop:]
    return rest if rest.strip() else None


def _block_span(text: str, begin: str, end: str) -> tuple[int, int] | None:
    start = text.find(begin)
    if start < 0:
        return None
    stop = text.find(end, start)
    if stop < 0:
        raise ConfigError(f"found '{begin}' without its closing '{end}'; fix the file by hand — nothing was changed")
    return start, stop + len(end)


def holds_token(text: str | None) -> bool:
    """True when `text` contains an Echo Memory token (such a file must be readable by its owner only)."""
    return text is not None and _TOKEN_RE.search(text) is not None


def apply_changes(changes: list[FileChange], backup_dir: Path | None = None, project: Path | None = None,
                  *, mask_backups: bool = False) -> list[Path]:
    """Write every changed file atomically, keeping a backup of each existing one.

    The backup holds the file as it was just before this write: `<name>.echo-memory.bak` next to it,
    except for files inside `project` (a repository: its history is the backup, and a stray file
    would get committed), whose backups go under `backup_dir` by their path in the project.
    A file whose `after` is None is removed (after its backup). Any file that holds a token after
    the write, or whose backup does, is made 0600. With `mask_backups` (uninstall), every Echo Memory
    token in a backup is cut to its prefix: removing a client must not leave its secret behind.
    Returns the backups written.
    """
    backups: list[Path] = []
    for change in changes:
        if not change.changed:
            continue
        current = read_text(change.path)
        if current != change.before:
            raise ConfigError(f"{change.path} changed while we were working; run again — nothing was written to it")
        if current is not None:
            backup = _backup_path(change.path, backup_dir, project)
            saved = mask_tokens(current) if mask_backups else current
            _atomic_write(backup, saved, _mode(change.path, saved))
            backups.append(backup)
        if change.after is None:
            change.path.unlink(missing_ok=True)
            if change.prune_empty_dir and change.path.parent.is_dir() and not any(change.path.parent.iterdir()):
                change.path.parent.rmdir()
        else:
            _atomic_write(change.path, change.after, _mode(change.path, change.after))
    return backups


def _backup_path(path: Path, backup_dir: Path | None, project: Path | None) -> Path:
    if project is not None and backup_dir is not None and path.is_relative_to(project):
        relative = path.relative_to(project)
        return backup_dir / project.name / relative.with_name(relative.name + BACKUP_SUFFIX)
    return path.with_name(path.name + BACKUP_SUFFIX)


def _mode(path: Path, text: str) -> int:
    if holds_token(text):
        return 0o600  # existing files too: a 0644 file that now carries a token is tightened
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        return 0o644  # a new file without a secret, e.g. a project file meant to be committed


def _atomic_write(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = [
    "BACKUP_SUFFIX",
    "ConfigError",
    "FileChange",
    "apply_changes",
    "check_toml",
    "dump_json",
    "holds_token",
    "load_json",
    "mask_tokens",
    "read_text",
    "remove_block",
    "toml_key",
    "toml_value",
    "upsert_block",
]
