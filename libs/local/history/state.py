"""Where an import left off: per-source watermarks and per-conversation checkpoints, in the data directory.

One SQLite file (`<home>/history/import-state.sqlite3`). A checkpoint is written in the same
step as the batch of turns it covers is acknowledged by the store, and every write is its own
committed transaction, so an import killed at any point (kill -9 included) resumes from its
last acknowledged batch; turns sent again after a kill are recognised by the store's turn ids.

- checkpoint (source, conversation key): `resume` (the reader's position after the last
  imported turn), `last_time`, `last_id` (the last imported turn's end time and id),
  `content_hash` (of its episode text), and the conversation's `size`/`updated` when it was
  read to its end, so an unchanged file is not opened again.
- watermark (source): the start time of the last run that read every conversation of the
  source. The next run opens only conversations changed since the watermark minus
  WATERMARK_OVERLAP (it re-reads its boundary); the checkpoints make re-reading harmless.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WATERMARK_OVERLAP = 300.0  # seconds: clock skew and coarse file times never hide a change

SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoint (
    source       TEXT NOT NULL,
    conversation TEXT NOT NULL,
    resume       TEXT,
    last_time    REAL,
    last_id      TEXT,
    content_hash TEXT,
    seen_size    INTEGER,
    seen_updated REAL,
    PRIMARY KEY (source, conversation)
);
CREATE TABLE IF NOT EXISTS watermark (
    source TEXT PRIMARY KEY,
    time   REAL NOT NULL
);
"""


@dataclass
class Checkpoint:
    resume: Any = None
    last_time: float | None = None
    last_id: str | None = None
    content_hash: str | None = None
    seen_size: int | None = None
    seen_updated: float | None = None


def state_path(home: Path) -> Path:
    return home / "history" / "import-state.sqlite3"


class ImportState:
    """The checkpoint store; `readonly` (dry runs) never creates or changes the file."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly
        self.conn: sqlite3.Connection | None = None
        if readonly:
            if path.exists():
                self.conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(path, timeout=30, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")  # a committed checkpoint survives a power cut too
            self.conn.executescript(SCHEMA)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def checkpoint(self, source: str, conversation: str) -> Checkpoint | None:
        if self.conn is None:
            return None
        row = self.conn.execute(
            "SELECT resume, last_time, last_id, content_hash, seen_size, seen_updated FROM checkpoint "
            "WHERE source = ? AND conversation = ?", (source, conversation)).fetchone()
        if row is None:
            return None
        return Checkpoint(json.loads(row[0]) if row[0] else None, row[1], row[2], row[3], row[4], row[5])

    def save(self, source: str, conversation: str, cp: Checkpoint) -> None:
        if self.readonly or self.conn is None:
            return
        self.conn.execute(
            "INSERT INTO checkpoint (source, conversation, resume, last_time, last_id, content_hash, seen_size, "
            "seen_updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (source, conversation) DO UPDATE SET "
            "resume = excluded.resume, last_time = excluded.last_time, last_id = excluded.last_id, "
            "content_hash = excluded.content_hash, seen_size = excluded.seen_size, seen_updated = excluded.seen_updated",
            (source, conversation, json.dumps(cp.resume) if cp.resume is not None else None, cp.last_time, cp.last_id,
             cp.content_hash, cp.seen_size, cp.seen_updated))

    def watermark(self, source: str) -> float | None:
        if self.conn is None:
            return None
        row = self.conn.execute("SELECT time FROM watermark WHERE source = ?", (source,)).fetchone()
        return float(row[0]) if row else None

    def set_watermark(self, source: str, time: float) -> None:
        if self.readonly or self.conn is None:
            return
        self.conn.execute("INSERT INTO watermark (source, time) VALUES (?, ?) ON CONFLICT (source) DO UPDATE "
                          "SET time = excluded.time", (source, time))
