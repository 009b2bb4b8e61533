"""import_episodes: raw evidence (chat turns, documents) stored as searchable episodes in bulk."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from libs.contracts.common import StrictModel

MAX_IMPORT_BATCH = 2000


class EpisodeIn(StrictModel):
    kind: Literal["turn", "document", "tool_call"] = "turn"
    content: str = Field(min_length=1, max_length=20_000, description="the raw text, e.g. 'Alice: hi'")
    speaker: str | None = Field(None, max_length=200)
    session_id: str | None = Field(None, max_length=200, description="conversation or session the turn belongs to")
    seq: int | None = Field(None, ge=0, description="position inside the session (neighbour channel)")
    occurred_at: int | None = Field(None, ge=0, description="Unix seconds when it was said or written")
    project: str | None = Field(None, max_length=200)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ImportEpisodesInput(StrictModel):
    scope: str | None = Field(None, description="scope to import into; default shared")
    episodes: list[EpisodeIn] = Field(min_length=1, max_length=MAX_IMPORT_BATCH)


class ImportEpisodesResult(BaseModel):
    imported: int
    episode_ids: list[str]
    scope: str
