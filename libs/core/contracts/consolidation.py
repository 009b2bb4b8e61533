"""Consolidation: tier runs over a scope, their log and undo, and the session brief."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import StrictModel
from echo_memory.libs.core.contracts.framing import MemoryNotice

Tier = Literal["hot", "consolidated", "archived"]


class ConsolidateInput(StrictModel):
    scope: str | None = Field(None, min_length=1, max_length=100, description="one scope; every scope when omitted")
    dry_run: bool = Field(False, description="compute what would move and be built, change nothing")


class TierCounts(BaseModel):
    """Facts per outcome of one run in one scope."""

    placed: int = Field(0, description="facts that had never been placed by a run and got their first tier")
    promoted: int = Field(0, description="facts moved to a hotter tier")
    demoted: int = Field(0, description="facts moved to a colder tier")
    unchanged: int = Field(0, description="facts already in the tier the policy gives them")
    hot: int = Field(0, description="facts hot after the run")
    consolidated: int = Field(0, description="facts consolidated after the run")
    archived: int = Field(0, description="facts archived after the run")
    digests_built: int = Field(0, description="digest versions started (new or changed member sets)")
    digests_ended: int = Field(0, description="digest versions ended because their subject no longer qualifies")
    digests_unchanged: int = Field(0, description="digests whose member set did not change")
    failed: int = Field(0, description="steps that failed (the run is then rolled back whole)")
    skipped: int = Field(0, description="facts or digests a run left alone, e.g. changed by another run meanwhile")


class ScopeRun(BaseModel):
    run_id: str | None = Field(description="the run's id; null for a dry run, which records nothing")
    scope: str
    policy_version: int
    counts: TierCounts
    moves_sample: list[TierMove] = Field(default_factory=list, description="up to 20 of the run's tier moves")


class TierMove(BaseModel):
    fact_id: str
    from_tier: Tier
    to_tier: Tier
    reason: str


class ConsolidateResult(BaseModel):
    dry_run: bool
    runs: list[ScopeRun]


class ConsolidateLogInput(StrictModel):
    scope: str | None = Field(None, min_length=1, max_length=100, description="only this scope's runs")
    limit: int = Field(20, ge=1, le=500, description="the newest runs, at most this many")


class RunInfo(BaseModel):
    run_id: str
    scope: str
    actor: str
    policy_version: int
    started_at: datetime
    finished_at: datetime | None
    undone_at: datetime | None
    counts: TierCounts


class ConsolidateLogResult(BaseModel):
    runs: list[RunInfo]


class ConsolidateUndoInput(StrictModel):
    run_id: str = Field(min_length=1, max_length=64, description="a run id from `consolidate log`")


class ConsolidateUndoResult(BaseModel):
    run_id: str
    reverted: int = Field(description="facts put back in the tier they had before the run")
    skipped: int = Field(description="facts a later run has moved again: left where that run put them")
    digests_reverted: int = Field(description="digest versions the run started that were ended again")
    digests_reopened: int = Field(description="digest versions the run had ended that are current again")


class BriefInput(StrictModel):
    project: str | None = Field(None, min_length=1, max_length=200,
                                description="favour what was written in this project (a name, as facts record it)")
    scope: str | list[str] | None = Field(None, description="scopes to brief from (default: every scope you may read)")
    max_tokens: int = Field(600, ge=50, le=8000, description="budget for the brief's text")


class BriefItem(BaseModel):
    digest_id: str
    kind: Literal["entity", "topic"]
    entity: str | None = Field(description="the entity an entity digest describes; null for a topic")
    scope: str
    summary: str
    facts: int = Field(description="current facts the digest summarises")
    tokens: int
    last_seen: datetime


class BriefResult(BaseModel):
    memory_notice: MemoryNotice
    items: list[BriefItem]
    text: str = Field(description="the items framed as recalled data, ready to paste into a model's context")
    tokens: int = Field(description="tokens of the items' summaries (within max_tokens)")
    digests_available: int = Field(description="current digests in the scopes read; more than items when the budget cut")
    note: str | None = Field(None, description="why the brief is empty, when it is")


ScopeRun.model_rebuild()
