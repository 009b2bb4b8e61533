"""Client databases opened read-only, so an import never locks or changes the client's store."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def open_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection (the client may be writing; WAL readers do not block it)."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
    conn.row_factory = sqlite3.Row
    return conn
