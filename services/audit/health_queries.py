"""The statements of `health`, read from health.sql by the name of each `-- name:` block."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_SQL_FILE = Path(__file__).with_name("health.sql")
_BLOCK = re.compile(r"^-- name: ([a-z_]+)\n", re.MULTILINE)


@cache
def statements() -> dict[str, str]:
    """name -> SQL text of every block in health.sql (the file's header before the first block is skipped)."""
    parts = _BLOCK.split(_SQL_FILE.read_text(encoding="utf-8"))
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def sql(name: str) -> str:
    """One named statement; KeyError for a name health.sql does not hold."""
    return statements()[name]
