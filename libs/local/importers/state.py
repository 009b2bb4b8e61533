"""Where an import from another memory system left off: the records the store has acknowledged.

One SQLite file in the data directory, one row per record (a digest of the record as it was
sent: its key, content, agent, session and scope) that the store stored, superseded with or
already held; a deferred or refused record gets no row, so the next run tries it again (the user
may have fixed its cause). The rows of a batch are written in one committed transaction after
the writes service answered it, so an import killed at any point resumes after its last
acknowledged batch; a batch the store committed just before the kill is sent again and answered
from the store's idempotency keys (it stores nothing twice, and is counted once more as stored).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS done_record (
    source  TEXT NOT NULL,
    digest  TEXT NOT NULL,
    outcome TEXT NOT NULL,
    PRIMARY KEY (source, digest)
);
"""
SELECT_DONE = "SELECT outcome FROM done_record WHERE source = ? AND digest = ?"
INSERT_DONE = "INSERT OR REPLACE INTO done_record (source, digest, outcome) VALUES (?, ?, ?)"


def from_state_path(home: Path) -> Path:
    return home / "history" / "import-from-state.sqlite3"


class FromState:
    """The acknowledged batches; `readonly` (dry runs) never creates or changes the file."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.readonly = readonly
        self.conn: sqlite3.Connection | None = None
        if readonly:
            if path.exists():
                self.conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")  # an acknowledged batch stays acknowledged after a power cut
        self.conn.executescript(SCHEMA)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def done(self, source: str, digest: str) -> str | None:
        """The outcome an earlier run had for the record; None when the store never acknowledged it."""
        if self.conn is None:
            return None
        row = self.conn.execute(SELECT_DONE, (source, digest)).fetchone()
        return str(row[0]) if row else None

    def mark_done(self, source: str, outcomes: list[tuple[str, str]]) -> None:
        """Record (digest, outcome) pairs of one acknowledged batch, all or none."""
        if self.readonly or self.conn is None or not outcomes:
            return
        self.conn.execute("BEGIN")
        try:
            self.conn.executemany(INSERT_DONE, [(source, d, o) for d, o in outcomes])
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
