"""calibrate: how trustworthy entity resolution is on this store, and its thresholds."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import StrictModel


class CalibrateInput(StrictModel):
    apply: bool = Field(False, description="record the proposed thresholds for writes, if the CI excludes chance")
    rounds: int = Field(1000, ge=100, le=10000, description="bootstrap resamples for the AUC's 95% interval")


class CalibrationFigures(BaseModel):
    """The resolution score measured on one set of labelled name pairs."""

    pairs: int
    variants: int = Field(description="pairs naming one entity")
    lookalikes: int = Field(description="pairs naming two different entities")
    auc: float
    auc_ci95: tuple[float, float]
    deferral_precision: float = Field(description="of the pairs deferred or merged, the share that are variants")
    deferral_recall: float = Field(description="of the variants, the share deferred or merged")
    lookalikes_caught: float = Field(description="of the look-alikes, the share deferred or merged")


class CalibrateResult(BaseModel):
    """Figures on the store's own decisions, on those plus the shipped set, and what was recorded."""

    calibration_id: int = Field(description="the resolution_calibration row this run recorded")
    computed_at: datetime
    store_pairs: int = Field(description="labelled pairs taken from the store's own resolution decisions")
    store_sources: dict[str, int] = Field(
        description="confirmed merges, `new` answers, aliases, a person's merges and unmerges, counted")
    store: CalibrationFigures | None = Field(None, description="the store's pairs alone; null when it holds none")
    combined: CalibrationFigures = Field(description="the store's pairs and the shipped labelled set together")
    defer_at: float = Field(description="the deferral threshold in force before this run")
    merge_at: float = Field(description="the automatic-merge threshold in force before this run")
    proposed_defer_at: float
    proposed_merge_at: float
    applied: bool = Field(description="true when the proposed thresholds now govern writes")
    message: str = Field(description="one sentence: whether resolution is trustworthy and what changed")
