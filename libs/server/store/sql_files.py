"""Named statements kept in a .sql file beside the code that runs them.

A file holds blocks, each opened by a line `-- name: <statement_name>`; whatever precedes the
first block (a header comment) is not a statement.
"""

from __future__ import annotations

import re
from pathlib import Path

_BLOCK = re.compile(r"^-- name: ([a-z_]+)\n", re.MULTILINE)


class SqlFile:
    """The statements of one file, read once on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._statements: dict[str, str] | None = None

    def statements(self) -> dict[str, str]:
        """name -> SQL text of every block of the file."""
        if self._statements is None:
            parts = _BLOCK.split(self.path.read_text(encoding="utf-8"))
            self._statements = {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}
        return self._statements

    def __call__(self, name: str) -> str:
        """One named statement; KeyError for a name the file does not hold."""
        return self.statements()[name]
