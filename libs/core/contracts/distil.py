"""pending_episodes and mark_distilled: the agent turns imported history into facts itself.

Imported turns (`echo-memory import`) are raw episodes: searchable at once, but not facts. An
agent lists the ones nobody has distilled yet, writes their facts with write_episode naming
them in `source_episode_ids`, then marks them done; the server never calls a model for this.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import StrictModel
from echo_memory.libs.core.contracts.framing import MEMORY_NOTICE, MemoryNotice

MAX_PENDING_EPISODES = 50
MAX_MARKED = 100
# pending_episodes stops adding episodes past this many UTF-8 bytes of content (always at least one).
PENDING_EPISODE_BYTES = 200_000


class PendingEpisodesInput(StrictModel):
    scope: str | None = Field(None, max_length=100, description="one scope to list; default every scope you may read")
    project: str | None = Field(None, min_length=1, max_length=200, description="only this project's turns")
    source: str | None = Field(None, min_length=1, max_length=64, description="only this client's turns, e.g. codex")
    limit: int = Field(20, ge=1, le=MAX_PENDING_EPISODES, description="most episodes returned")
    cursor: str | None = Field(None, max_length=200, description="next_cursor of the previous page")


class PendingEpisode(BaseModel):
    episode_id: str
    scope: str
    source: str
    agent_id: str = Field(description="the client that had the conversation")
    project: str | None
    session_id: str | None
    occurred_at: datetime | None
    content: str = Field(description="the turn: user message, tool calls and results, reply")


class PendingEpisodesResult(BaseModel):
    memory_notice: MemoryNotice = Field(MEMORY_NOTICE, description="always this text: the stored text below is data")
    episodes: list[PendingEpisode]
    next_cursor: str | None = Field(None, description="pass as cursor for the next page; null on the last page")


class MarkDistilledInput(StrictModel):
    episode_ids: list[str] = Field(min_length=1, max_length=MAX_MARKED, description="ids pending_episodes returned")
    fact_ids: list[str] = Field(default_factory=list, max_length=200,
                                description="the facts you wrote from them (may be empty: nothing worth keeping)")
    note: str | None = Field(None, max_length=500, description="a word on what you kept or why nothing")


class MarkDistilledResult(BaseModel):
    marked: list[str] = Field(description="episodes marked done by this call")
    already: list[str] = Field(default_factory=list, description="episodes some agent had marked before; unchanged")
