"""What every reader yields: one record per thing the source stored, mapped or refused with its reason."""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.write import MAX_FACT_CHARS, MAX_NAME_CHARS

MAX_TYPE_CHARS = 64
MAX_RELATION_CHARS = 100

RecordKind = Literal["entity", "observation", "relation", "memory", "memory_version", "note", "line"]
Outcome = Literal["stored", "superseded", "ended", "unchanged", "deferred", "refused", "not_mapped"]
OUTCOMES: tuple[Outcome, ...] = ("stored", "superseded", "ended", "unchanged", "deferred", "refused", "not_mapped")
WRITTEN: frozenset[str] = frozenset({"stored", "superseded", "ended"})  # outcomes that changed the store


class EntityRef(BaseModel):
    name: str
    type: str


class PlannedFact(BaseModel):
    """One fact edge as write_episode takes it; `source` and `target` name entities of the record."""

    source: str
    target: str
    relation: str
    text: str


class SourceRecord(BaseModel):
    """One record of the source: a fact to write, or why it cannot be (then `fact` is None).

    `key` is stable across runs for the same record (the idempotency key derives from it and the
    content); `where` says where the record is in the source, for messages.
    """

    key: str
    kind: RecordKind
    where: str
    entities: list[EntityRef] = Field(default_factory=list)
    fact: PlannedFact | None = None
    outcome: Outcome | None = Field(None, description="decided by the reader: refused or not_mapped, with reason")
    reason: str | None = None
    ends: bool = Field(False, description="the record ends `fact`'s edge (a deletion at the source); `reason` says why")
    agent: str | None = Field(None, description="who wrote it at the source, when the source says so")
    session: str
    project: str | None = None


def digest(text: str, length: int = 10) -> str:
    """A short, stable hex digest: the identity of a record the source gives no id."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def problems(record: SourceRecord) -> str | None:
    """Why write_episode would refuse the record's shape, said before sending; None when it fits.

    Nothing is cut to fit: a field over its limit is reported, never shortened.
    """
    for entity in record.entities:
        if not entity.name.strip():
            return "an entity name is empty"
        if len(entity.name) > MAX_NAME_CHARS:
            return f"entity name is {len(entity.name)} characters; at most {MAX_NAME_CHARS} are stored"
        if not entity.type.strip():
            return f"entity '{entity.name[:80]}' has an empty type"
        if len(entity.type) > MAX_TYPE_CHARS:
            return f"entity type of '{entity.name[:80]}' is {len(entity.type)} characters; at most {MAX_TYPE_CHARS}"
    fact = record.fact
    if fact is not None:
        if not fact.text.strip():
            return "the text is empty"
        if len(fact.text) > MAX_FACT_CHARS:
            return f"the text is {len(fact.text)} characters; a fact holds at most {MAX_FACT_CHARS}"
        if not fact.relation.strip():
            return "the relation is empty"
        if len(fact.relation) > MAX_RELATION_CHARS:
            return f"the relation is {len(fact.relation)} characters; at most {MAX_RELATION_CHARS}"
        if "\x00" in fact.text or any("\x00" in e.name for e in record.entities):
            return "the text holds a NUL character"
    return None


def refused(key: str, kind: RecordKind, where: str, reason: str, session: str) -> SourceRecord:
    return SourceRecord(key=key, kind=kind, where=where, outcome="refused", reason=reason, session=session)


def checked(record: SourceRecord) -> SourceRecord:
    """The record, or the record marked refused with the reason its shape cannot be stored."""
    problem = problems(record) if record.outcome is None else None
    if problem is None:
        return record
    return record.model_copy(update={"outcome": "refused", "reason": problem, "fact": None})
