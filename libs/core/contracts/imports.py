"""import_episodes: raw evidence (chat turns, documents) stored as searchable episodes in bulk.

An episode that names its origin (`source` and `external_id`, e.g. an agent-history turn) is
stored once per pair in the whole store: sending it again is reported as `already` and stores
nothing, so a re-import or a second importer never duplicates a turn.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import StrictModel

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
    source: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9._-]*$",
                               description="where the episode comes from, e.g. claude-code; needs external_id")
    external_id: str | None = Field(None, min_length=1, max_length=200,
                                    description="the episode's id at its source; (source, external_id) is unique")


# The store keeps an episode's origin in its metadata (`source`, `external_id`): `external_id` is
# only ever set from the field, and a metadata `source` must agree with the field when both are given.
RESERVED_METADATA_KEY = "external_id"


class ImportEpisodesInput(StrictModel):
    scope: str | None = Field(None, description="scope to import into; default shared")
    episodes: list[EpisodeIn] = Field(min_length=1, max_length=MAX_IMPORT_BATCH)


class ImportEpisodesResult(BaseModel):
    imported: int = Field(description="episodes stored by this call")
    episode_ids: list[str] = Field(description="one id per input episode, in input order (the stored one if already; "
                                               "empty for a turn `echo-memory forget` erased)")
    scope: str
    already: int = Field(0, description="episodes whose (source, external_id) the store held before; not stored again")
    erased: int = Field(0, description="turns whose (source, external_id) an erasure took away; never stored again")
