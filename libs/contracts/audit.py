"""get_audit_log: the history of every change, oldest first, paged."""

from __future__ import annotations

from pydantic import BaseModel, Field

from libs.contracts.common import StrictModel


class GetAuditLogInput(StrictModel):
    since: str | int | None = Field(None, description="ISO-8601 or Unix seconds, inclusive")
    until: str | int | None = None
    scope: str | None = None
    agent: str | None = None
    kind: str | None = None
    fact_id: str | None = None
    cursor: str | None = None
    limit: int = Field(100, ge=1, le=1000)


class GetAuditLogResult(BaseModel):
    entries: list[dict[str, object]] = Field(default_factory=list)
    next_cursor: str | None = None


# Every kind of audit row, written in the same transaction as the change it records.
AUDIT_KINDS = (
    "fact_created",  # after: the edge and claim
    "fact_superseded",  # before: the ended claim (with its fact_id); after: the new one
    "entity_created",
    "entity_resolved",  # after.how: exact | alias | agent-confirmed
    "recall_saved",
    "document_registered",
    "document_ingested",
    "causal_hint_added",  # post_hoc = true
)
