"""Small shapes used by several tools."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

Confidence = Literal["extracted", "inferred", "ambiguous"]
CausalHint = Literal["caused_by", "led_to", "enabled_by", "blocked_by", "contradicts"]


class StrictModel(BaseModel):
    """Tool inputs reject unknown fields, so a typo is an error instead of silently ignored."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class Provenance(BaseModel):
    """Who wrote an item, through what, and when it was true."""

    agent_id: str
    tool: str | None = None
    project: str | None = None
    session_id: str | None = None
    written_at: datetime
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    scope: str
