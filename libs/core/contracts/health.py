"""health: how well the memory is used, as one 0-100 score, its figures, and what to do about each.

The JSON shape is stable (docs/health.md): `score` at the top, every raw figure under `figures`,
and one entry per check under `checks`, each with its status, a sentence, and the action to take.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import StrictModel

HEALTH_FORMAT = 1  # bumped only when a field changes meaning or disappears

CheckStatus = Literal["strong", "weak", "unknown"]


class HealthInput(StrictModel):
    scope: str | None = Field(None, description="one scope's public name; default every scope of the org")
    window_days: int = Field(7, ge=1, le=365, description="how far back read figures look")
    include_demo: bool = Field(False, description="count demo-seed's scopes (demo, demo-*) when no scope is named")


class AgentWrites(BaseModel):
    """One agent's facts in the scopes looked at."""

    agent_id: str
    facts: int
    last_write: datetime


class LexicalState(BaseModel):
    """One scope corpus whose lexical statistics do not match its rows."""

    scope: str
    corpus: Literal["facts", "episodes"]
    rows: int
    stats_rows: int | None = Field(description="documents the statistics count; null: no statistics at all")
    format_version: int | None
    reason: str


class EmbeddingState(BaseModel):
    """A scope whose vectors were made by another model than the code embeds with."""

    scope: str
    model: str


class CalibrationState(BaseModel):
    ran: bool = Field(description="false: calibration has never run on this store")
    last_run: datetime | None = None
    kind: str | None = Field(None, description="'applied' (it changed the thresholds) or 'reported'")
    reason: str | None = Field(None, description="what that run measured: AUC with its 95% interval and pair counts")


class ConsolidationState(BaseModel):
    last_run: datetime | None = Field(None, description="when the newest consolidation run of these scopes finished")
    failures: int = Field(0, description="consolidation runs (and sweeps) that failed within the window")
    last_failure_at: datetime | None = None
    last_failure: str | None = Field(None, description="the newest failure's error code and message")


class HealthFigures(BaseModel):
    """Every figure the score is made of, read from the store's own tables."""

    scopes: list[str]
    window_days: int
    facts: int = Field(description="every version of every fact")
    active_facts: int
    bulk_facts: int = Field(description="facts written by the admin identity (CLI, scripts, harnesses)")
    bulk_share: float | None = Field(description="bulk_facts / facts; null when there are no facts")
    imported_episodes: int = Field(description="turns, documents and tool calls stored by bulk import")
    last_real_write: datetime | None = Field(description="newest fact an agent (not the admin) wrote")
    last_write: datetime | None
    hours_since_real_write: float | None
    writers: list[AgentWrites]
    agents_wired: list[str] = Field(description="agents with a live token that may write these scopes")
    agents_never_writing: list[str] = Field(description="wired agents with no fact in these scopes")
    reads: int = Field(description="agent reads of these scopes in the window (admin reads excluded)")
    reads_per_day: float
    reads_with_results: int
    read_hit_share: float | None = Field(description="reads_with_results / reads; null without reads")
    recall_tokens_mean: float | None = Field(description="mean tokens a read returned in the window")
    full_dump_tokens: int = Field(description="tokens of every active fact: what pasting it all would cost")
    recall_share_of_dump: float | None = Field(description="recall_tokens_mean / full_dump_tokens")
    saves: int = Field(description="record_recall_save calls on these scopes' facts in the window")
    saves_per_read: float | None
    deferred_waiting: int = Field(description="deferred mentions no later write of the agent resolved")
    instruction_like_facts: int = Field(
        0, description="active facts whose text addresses the reading agent (flag instruction_like, schema v14)"
    )
    instruction_like_episodes: int = Field(0, description="stored turns, documents and writes flagged instruction_like")
    lexical_stale: list[LexicalState]
    embedding_mismatch: list[EmbeddingState]
    code_embedding_model: str
    schema_version: int
    code_schema_version: int
    calibration: CalibrationState
    consolidation: ConsolidationState = Field(
        default_factory=ConsolidationState, description="automatic consolidation: its last run and its failures"
    )


class HealthCheck(BaseModel):
    name: str = Field(description="stable identifier, e.g. write_freshness")
    status: CheckStatus
    weight: int = Field(description="points this check is worth out of 100")
    points: float = Field(description="points it earned")
    detail: str = Field(description="what the figures say, in one sentence")
    action: str | None = Field(description="what to do; null when nothing needs doing")


class HealthResult(BaseModel):
    format: int = HEALTH_FORMAT
    score: int = Field(ge=0, le=100, description="the sum of every check's points, rounded")
    generated_at: datetime
    strong: list[str] = Field(description="names of the checks that are strong")
    weak: list[str] = Field(description="names of the checks that are weak, worst first")
    checks: list[HealthCheck]
    figures: HealthFigures
