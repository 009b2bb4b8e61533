"""Files that hold memory or tokens (exports, logs) are readable by their owner only (mode 0600)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO, Literal, TextIO


def _fd(path: Path, flags: int) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o600)
    os.fchmod(fd, 0o600)  # O_CREAT's mode applies only to a new file; an older one is narrowed too
    return fd


def make_private(path: Path) -> None:
    """Create `path` empty if absent and set it to 0600; its content is kept. Raises OSError as `open`."""
    os.close(_fd(path, os.O_APPEND))


def open_private_text(path: Path, mode: Literal["w", "a"]) -> TextIO:
    """`path` opened for UTF-8 text ("w" truncates, "a" appends), mode 0600. Raises OSError as `open`."""
    return os.fdopen(_fd(path, os.O_TRUNC if mode == "w" else os.O_APPEND), mode, encoding="utf-8")


def open_private_append(path: Path) -> BinaryIO:
    """`path` opened to append bytes (a log a child process writes to), mode 0600. Raises OSError as `open`."""
    return os.fdopen(_fd(path, os.O_APPEND), "ab")
