"""mem0's memories (pip `mem0ai`): its export of memories (JSON) and its history database (SQLite).

- The export is what `Memory.get_all()` returns: `{"results": [...]}` or a bare list of
  memories `{id, memory, hash, created_at, updated_at, user_id, agent_id, run_id, actor_id,
  role, metadata}`.
- The history database is mem0's `history` table (memory_id, old_memory, new_memory, event ADD |
  UPDATE | DELETE, created_at, updated_at, is_deleted, actor_id, role), by default
  `~/.mem0/history.db`. A folder is read as its `history.db` plus the `*.json` exports in it,
  joined by memory id (the history has no user, agent or run ids; the export has no versions).

Mapped as: each memory is a fact of its owner (the user id, else the agent id, else "mem0")
on its own edge (relation `memory <id>`): "<owner>: <memory>". Its agent id is the agent that
wrote it, its run id the session. Its history replays in order: ADD stores the first version,
each UPDATE a new version that supersedes the one before, DELETE ends the current version
(writes' `end_facts`: its validity ends, nothing is erased).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.core.contracts.identity import is_reserved_agent
from echo_memory.libs.local.importers.records import EntityRef, PlannedFact, SourceRecord, checked, refused

SOURCE = "mem0"
HISTORY_FILE = "history.db"
SQLITE_MAGIC = b"SQLite format 3\x00"
MAX_EXPORT_BYTES = 500_000_000

UNMAPPED = (
    "mem0's created_at and updated_at: write_episode sets validity when the import writes, so the times are "
    "not carried (every version is valid from the import; the order of versions is kept)",
    "metadata, hash, actor_id and role of a memory",
)

HISTORY_ROWS = """
SELECT rowid, id, memory_id, old_memory, new_memory, event, created_at, updated_at, actor_id, role
FROM history
ORDER BY COALESCE(updated_at, created_at), rowid
"""


def check_path(path: Path) -> Path:
    """The export file, history database or folder to read; InvalidArgument for anything else."""
    if path.is_dir():
        if not (path / HISTORY_FILE).is_file() and not any(path.glob("*.json")):
            raise InvalidArgument(f"{path}: a folder without {HISTORY_FILE} or a *.json export of mem0")
        return path.resolve()
    if not path.is_file():
        raise InvalidArgument(f"{path}: not a file or folder")
    return path.resolve()


def _is_sqlite(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


def _parts(path: Path) -> tuple[Path | None, list[Path]]:
    """(history database, export files) of the path."""
    if path.is_dir():
        history = path / HISTORY_FILE
        exports = sorted(p for p in path.glob("*.json") if p.is_file() and not p.is_symlink())
        return (history if history.is_file() and not history.is_symlink() else None), exports
    return (path, []) if _is_sqlite(path) else (None, [path])


class Owner:
    """Who a memory belongs to, from the export (the history does not say)."""

    def __init__(self, memory: dict[str, Any]) -> None:
        self.user = _s(memory.get("user_id"))
        self.agent = _s(memory.get("agent_id"))
        self.run = _s(memory.get("run_id"))

    @property
    def entity(self) -> EntityRef:
        if self.user:
            return EntityRef(name=self.user, type="person")
        if self.agent:
            return EntityRef(name=self.agent, type="agent")
        return EntityRef(name=SOURCE, type="memory store")

    @property
    def session(self) -> str:
        if self.run:
            return f"{SOURCE} run {self.run}"
        return f"{SOURCE} user {self.user}" if self.user else SOURCE

    @property
    def writer(self) -> str | None:
        return self.agent if self.agent and not is_reserved_agent(self.agent) else None


def _s(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _memory(key: str, where: str, memory_id: str, text: str, owner: Owner, kind: str = "memory") -> SourceRecord:
    me = owner.entity
    return checked(SourceRecord(
        key=key, kind="memory" if kind == "memory" else "memory_version", where=where, entities=[me],
        session=owner.session, agent=owner.writer,
        fact=PlannedFact(source=me.name, target=me.name, relation=f"memory {memory_id}", text=f"{me.name}: {text}")))


def _export_items(path: Path) -> Iterator[tuple[int, Any] | str]:
    """(index, item) of each memory in an export file, or a sentence why the file cannot be read."""
    if path.stat().st_size > MAX_EXPORT_BYTES:
        yield f"larger than {MAX_EXPORT_BYTES} bytes"
        return
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        yield f"not UTF-8 ({exc.reason} at byte {exc.start})"
        return
    except json.JSONDecodeError as exc:
        yield f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        return
    items = data.get("results", data.get("memories")) if isinstance(data, dict) else data
    if not isinstance(items, list):
        yield "not a mem0 export: expected a list of memories or {\"results\": [...]}"
        return
    yield from enumerate(items)


def read(path: Path) -> Iterator[SourceRecord]:
    """Every memory and history event; malformed ones come back refused with where they are."""
    history, exports = _parts(path)
    owners: dict[str, Owner] = {}
    latest: dict[str, str] = {}  # memory id -> its last text in the history
    export_rows: list[tuple[str, int, Any]] = []
    for export in exports:
        for item in _export_items(export):
            if isinstance(item, str):
                yield refused(f"file:{export.name}", "memory", export.name, f"{export.name}: {item}", SOURCE)
                continue
            export_rows.append((export.name, *item))
            if isinstance(item[1], dict) and _s(item[1].get("id")):
                owners.setdefault(str(item[1]["id"]), Owner(item[1]))
    if history is not None:
        yield from _history(history, owners, latest)
    for name, index, item in export_rows:
        where = f"{name} memory {index + 1}"
        if not isinstance(item, dict) or not _s(item.get("id")) or not isinstance(item.get("memory"), str):
            yield refused(f"export:{name}:{index}", "memory", where, f"{where}: a memory needs a string id and memory",
                          SOURCE)
            continue
        memory_id, text = str(item["id"]), str(item["memory"])
        if latest.get(memory_id) == text:
            yield SourceRecord(key=f"export:{memory_id}", kind="memory", where=where, outcome="unchanged",
                               reason="the history's last version of this memory, imported from there",
                               session=SOURCE)
            continue
        yield _memory(f"export:{memory_id}:{text}", where, memory_id, text, owners[memory_id])


def _history(path: Path, owners: dict[str, Owner], latest: dict[str, str]) -> Iterator[SourceRecord]:
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        yield refused(f"file:{path.name}", "memory_version", path.name, f"{path.name}: not opened: {exc}", SOURCE)
        return
    try:
        rows = conn.execute(HISTORY_ROWS)
    except sqlite3.Error as exc:
        conn.close()
        yield refused(f"file:{path.name}", "memory_version", path.name,
                      f"{path.name}: not a mem0 history database ({exc})", SOURCE)
        return
    try:
        for rowid, row_id, memory_id, _old, new, event, created, updated, _actor, _role in rows:
            where = f"{path.name} row {rowid}"
            key = f"history:{row_id or rowid}"
            if not isinstance(memory_id, str) or not memory_id:
                yield refused(key, "memory_version", where, f"{where}: no memory_id", SOURCE)
            elif event == "DELETE":
                owner = owners.get(memory_id) or Owner({})
                me = owner.entity
                yield checked(SourceRecord(
                    key=key, kind="memory_version", where=where, entities=[me], session=owner.session,
                    agent=owner.writer, ends=True, reason=f"memory {memory_id} was deleted in mem0 at {updated or created}",
                    fact=PlannedFact(source=me.name, target=me.name, relation=f"memory {memory_id}", text="deleted")))
            elif event in ("ADD", "UPDATE"):
                if not isinstance(new, str):
                    yield refused(key, "memory_version", where, f"{where}: {event} without new_memory", SOURCE)
                    continue
                latest[memory_id] = new
                owner = owners.get(memory_id) or Owner({})
                yield _memory(key, where, memory_id, new, owner, kind="version")
            else:
                yield refused(key, "memory_version", where, f"{where}: event {str(event)[:20]!r} is not ADD, UPDATE "
                              "or DELETE", SOURCE)
    finally:
        conn.close()
