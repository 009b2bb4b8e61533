"""Erasure (`echo-memory forget`): the admin's verbs `forget`, `forget_finish` and `forget_log`.

An erasure removes a fact (every version of its triple), an entity (its aliases and every fact
touching it or naming it) or a whole scope's memory from every place the content lives, and
records who did it, why and under which ticket in the erasure log, which holds ids, never content.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import StrictModel

TargetKind = Literal["fact", "entity", "scope"]
# Ids listed per kind in one answer, so a whole scope's erasure still fits in one bus message.
MAX_IDS_SHOWN = 1000


class ForgetInput(StrictModel):
    """Exactly one of `fact_id`, `entity`, `scope` (erase) or `search` (list candidates, never erase).

    `entity` names an entity of scope `in_scope` (stored scope name, default `shared`). Without
    `confirm` nothing changes: the answer is what would go.
    """

    fact_id: str | None = Field(None, max_length=64, description="a fact id: every version of its triple goes")
    entity: str | None = Field(None, max_length=500, description="an entity name or alias")
    in_scope: str = Field("shared", min_length=1, max_length=200, description="the scope `entity` is in")
    scope: str | None = Field(None, max_length=200, description="a stored scope name: everything in it goes")
    search: str | None = Field(None, max_length=500, description="list facts and entities holding this text")
    confirm: bool = False
    reason: str = Field("", max_length=1000, description="why (recorded; required with confirm)")
    ref: str | None = Field(None, max_length=200, description="the ticket or request this erasure answers")
    by: str | None = Field(None, max_length=200, description="the person who asked for it (default: the caller)")


class Candidate(BaseModel):
    """One thing `--search` found: an entity or a fact, with its text so a person can decide."""

    kind: Literal["fact", "entity"]
    id: str
    scope: str
    text: str = Field(description="the fact's text, or the entity's name")
    current: bool = Field(True, description="for a fact: whether this version is valid now")


class ForgetResult(BaseModel):
    """What went (confirm) or would go (dry run): counts per table and the ids of the rows."""

    dry_run: bool
    target_kind: TargetKind | None = Field(None, description="None for a search")
    scope: str | None = None
    erasure_id: str | None = Field(None, description="the erasure log's id; None for a dry run or a search")
    counts: dict[str, int] = Field(default_factory=dict, description="rows per table (deleted or tombstoned)")
    ids: dict[str, list[str]] = Field(default_factory=dict, description="ids per kind of row (see ids_truncated)")
    ids_truncated: list[str] = Field(
        default_factory=list,
        description="kinds whose id list holds only the first MAX_IDS_SHOWN ids (counts are always complete; "
                    "the erasure log keeps every id)")
    graph_mirror: str = Field("", description="what happened to the AGE graph mirror")
    candidates: list[Candidate] = Field(default_factory=list, description="--search only")


class ForgetFinishInput(StrictModel):
    erasure_id: str = Field(min_length=1, max_length=64)


class ForgetFinishResult(BaseModel):
    """After the erasure committed: tables vacuumed and event-stream messages deleted."""

    erasure_id: str
    vacuumed: list[str]
    events_scanned: int
    events_deleted: int
    stream: str = Field(description="what happened to the event stream (deleted, or why not)")


class ForgetLogInput(StrictModel):
    limit: int = Field(100, ge=1, le=1000)


class ErasureEntry(BaseModel):
    """One erasure: no content, only who, when, why, what kind and how many."""

    id: str
    erased_at: datetime
    actor: str
    erased_by: str
    reason: str
    ref: str | None
    target_kind: TargetKind
    target_id: str
    scope: str
    counts: dict[str, int]
    finished_at: datetime | None


class ForgetLogResult(BaseModel):
    erasures: list[ErasureEntry]
