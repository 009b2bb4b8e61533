"""Restore replays the erasure log: an export taken before an erasure never brings the content back.

The log (table `erasures`, written by the writes service's `forget`) holds the ids of every row an
erasure took away, blanked or tombstoned. Before a restore writes anything, the file's records are
filtered against it by their ids in the file (so also when the restore gives them new ids): erased
rows are dropped, rows that point at them are dropped or unlinked, and rows the erasure only
redacted are redacted the same way (audit tombstones, blanked read questions, write episodes
holding other facts' lines only).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import psycopg

ERASURES = "SELECT id::text, reason, erased_ids FROM erasures ORDER BY erased_at, id"


@dataclass
class ErasedIds:
    """Every id the org's erasures took away, by kind; `audit` maps an audit id to (erasure id, reason)."""

    facts: set[str] = field(default_factory=set)
    entities: set[str] = field(default_factory=set)
    episodes: set[str] = field(default_factory=set)
    rewritten: set[str] = field(default_factory=set)
    reads: set[str] = field(default_factory=set)
    saves: set[str] = field(default_factory=set)
    documents: set[str] = field(default_factory=set)
    audit: dict[int, tuple[str, str]] = field(default_factory=dict)
    by_row: dict[str, tuple[str, str]] = field(default_factory=dict)  # fact or entity id -> (erasure id, reason)

    def empty(self) -> bool:
        return not (self.facts or self.entities or self.episodes or self.reads or self.saves or self.documents
                    or self.audit)


@dataclass
class Replayed:
    records: list[Any]
    skipped: int  # records not restored
    redacted: int  # records restored without their erased text


async def load(conn: psycopg.AsyncConnection) -> ErasedIds:
    """The org's erasure log as id sets (empty when nothing was ever erased)."""
    erased = ErasedIds()
    for erasure_id, reason, ids in await (await conn.execute(ERASURES)).fetchall():
        erased.facts.update(ids.get("facts", []))
        erased.entities.update(ids.get("entities", []))
        erased.episodes.update(ids.get("episodes", []))
        erased.rewritten.update(ids.get("episodes_rewritten", []))
        erased.reads.update(ids.get("reads_blanked", []))
        erased.saves.update(ids.get("recall_saves", []))
        erased.documents.update(ids.get("documents", []))
        for audit_id in ids.get("audit_log", []):
            erased.audit[int(audit_id)] = (erasure_id, reason)
        for row_id in [*ids.get("facts", []), *ids.get("entities", [])]:
            erased.by_row[row_id] = (erasure_id, reason)
    return erased


def replay(records: list[Any], erased: ErasedIds) -> Replayed:
    """`records` (an export file's, in file order) as they read once every logged erasure is applied."""
    if erased.empty():
        return Replayed(records, 0, 0)
    kept_lines: dict[str, list[tuple[Any, str, str]]] = defaultdict(list)
    for r in records:
        if r.type == "fact" and r.id not in erased.facts and r.episode_id in erased.rewritten:
            kept_lines[r.episode_id].append((r.written_at, r.id, r.text))
    out: list[Any] = []
    skipped = redacted = 0
    for r in records:
        changed = _apply(r, erased, kept_lines)
        if changed is None:
            skipped += 1
            continue
        if changed is not r:
            redacted += 1
        out.append(changed)
    return Replayed(out, skipped, redacted)


def _apply(r: Any, e: ErasedIds, kept_lines: dict[str, list[tuple[Any, str, str]]]) -> Any | None:
    """The record after the erasures: itself, a redacted copy, or None when it must not come back."""
    kind = r.type
    if kind == "entity":
        return None if r.id in e.entities else r
    if kind == "alias":
        return None if r.entity_id in e.entities else r
    if kind == "episode":
        if r.id in e.episodes:
            return None
        if r.id in e.rewritten:
            lines = [text for _, _, text in sorted(kept_lines.get(r.id, []))]
            return r.model_copy(update={"content": "\n".join(lines)})
        return r
    if kind == "fact":
        if r.id in e.facts:
            return None
        return r.model_copy(update={"episode_id": None}) if r.episode_id in e.episodes else r
    if kind == "read":
        return r.model_copy(update={"query": None}) if r.id in e.reads and r.query is not None else r
    if kind == "read_result":
        return None if r.item_id in e.facts or r.item_id in e.episodes else r
    if kind == "recall_save":
        return None if r.id in e.saves or r.fact_id in e.facts else r
    if kind == "document":
        return None if r.id in e.documents else r
    if kind == "document_ingestion":
        return None if r.document_id in e.documents else r
    if kind == "audit":
        why = e.audit.get(r.id) or e.by_row.get(r.fact_id or "") or e.by_row.get(r.entity_id or "")
        if why is None:
            return r
        erasure_id, reason = why
        return r.model_copy(update={
            "before": None, "reason": f"erased by {erasure_id}: {reason}",
            "fact_id": None if r.fact_id in e.facts else r.fact_id,
            "entity_id": None if r.entity_id in e.entities else r.entity_id,
            "after": {"erasure_id": erasure_id, "fact_id": r.fact_id, "entity_id": r.entity_id},
        })
    return r
