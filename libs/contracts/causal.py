"""trace_cause: ordered cause → effect chains over causal hints."""

from __future__ import annotations

from pydantic import BaseModel, Field

from libs.contracts.common import StrictModel


class TraceCauseInput(StrictModel):
    topic: str = Field(min_length=1, max_length=1000, description="entity names or free text")
    scope: str | list[str] | None = None
    as_of: int | None = Field(None, ge=0)
    max_depth: int = Field(5, ge=1, le=10)
    max_chains: int = Field(10, ge=1, le=50)


class TraceCauseResult(BaseModel):
    chains: list[list[dict[str, object]]] = Field(default_factory=list)
    empty_kind: str | None = None
    message: str | None = None
