"""entity_deferred, entity_merge, entity_unmerge, entity_rename: a person fixes entity identity.

The writes verbs behind `echo-memory entities list --deferred | merge | unmerge | rename`, the
admin identity's only (the CLI on the host and the operator send them; no MCP tool does). An
entity is named by its stored name, one of its aliases (exact, case-insensitive) or its id, inside
one scope (default `shared`).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import StrictModel
from echo_memory.libs.core.contracts.write import Candidate

MAX_NAME = 200
MAX_REASON = 500
MAX_DEFERRED_PAGE = 500


class EntityRef(BaseModel):
    """One stored entity: its id, its name now and the scope it belongs to."""

    entity_id: str
    name: str
    type: str
    scope: str


class EntityDeferredInput(StrictModel):
    scope: str | None = Field(None, max_length=100, description="one scope; every scope the admin may read when absent")
    limit: int = Field(100, ge=1, le=MAX_DEFERRED_PAGE)


class DeferredLookalike(BaseModel):
    """A mention a write deferred (close to a stored entity, not stored) that no answer has resolved yet."""

    scope: str
    agent_id: str = Field(description="the agent whose write was deferred, and who is asked to answer")
    mention: str
    candidates: list[Candidate] = Field(description="stored entities it may name, best first, with their scores")
    times: int = Field(description="how many writes deferred this mention")
    first_deferred_at: datetime
    last_deferred_at: datetime


class EntityDeferredResult(BaseModel):
    deferred: list[DeferredLookalike] = Field(default_factory=list)
    more: bool = Field(False, description="true when `limit` left some out")


class EntityMergeInput(StrictModel):
    keep: str = Field(min_length=1, max_length=MAX_NAME, description="the entity that survives (A)")
    absorb: str = Field(min_length=1, max_length=MAX_NAME, description="the entity that becomes A's alias (B)")
    scope: str | None = Field(None, max_length=100, description="default: shared")
    reason: str | None = Field(None, max_length=MAX_REASON)


class EntityMergeResult(BaseModel):
    merge_id: int
    surviving: EntityRef
    absorbed: EntityRef
    facts_following: int = Field(description="facts in force that name the absorbed entity (or what it absorbed) "
                                             "and now answer as the surviving one")
    merged_at: datetime


class EntityUnmergeInput(StrictModel):
    entity: str = Field(min_length=1, max_length=MAX_NAME, description="the surviving entity of the merge (A)")
    alias: str = Field(min_length=1, max_length=MAX_NAME,
                       description="the absorbed entity: its name, one of its aliases or its id")
    scope: str | None = Field(None, max_length=100, description="default: shared")
    reason: str | None = Field(None, max_length=MAX_REASON)


class EntityUnmergeResult(BaseModel):
    merge_id: int
    entity: EntityRef
    restored: EntityRef = Field(description="the entity that is its own again, with the facts it brought")
    facts_returned: int
    undone_at: datetime


class EntityRenameInput(StrictModel):
    entity: str = Field(min_length=1, max_length=MAX_NAME)
    new_name: str = Field(min_length=1, max_length=MAX_NAME)
    scope: str | None = Field(None, max_length=100, description="default: shared")
    reason: str | None = Field(None, max_length=MAX_REASON)


class EntityRenameResult(BaseModel):
    entity: EntityRef = Field(description="the entity under its new name")
    old_name: str
    aliases: list[str] = Field(description="its aliases now; the old name among them unless only its case changed")
