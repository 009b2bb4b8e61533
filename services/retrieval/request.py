"""One query_memory search as the channels see it: built once per request, then only read.

The query is embedded in a worker thread while the statements that need no vector run, so the
search holds the embedding task and a channel that needs the vector awaits it (a finished task
answers at once, so every later await is free).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import numpy as np

from echo_memory.libs.core.config.retrieval import RetrievalSettings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.query import ItemKind
from echo_memory.libs.server.store.access import Scope


@dataclass(frozen=True)
class Search:
    """Who searches what, where, as of when, and how (the settings the service was started with)."""

    caller: Caller
    scopes: tuple[Scope, ...]  # every scope read, as resolved for the caller
    query: str  # stripped; empty for `about` or `digest` without one
    as_of: datetime | None  # the instant asked for; None: now
    at: datetime  # the instant whose valid facts are visible: `as_of`, or the time the search began
    tier: Literal["all", "hot"]
    top_k: int
    include_episodes: bool
    settings: RetrievalSettings
    model: str  # the embedding model's name, to tell which scopes hold another model's vectors
    vector: asyncio.Task[np.ndarray] | None = None  # None without a query

    @property
    def org(self) -> str:
        return self.caller.org

    @property
    def scope_ids(self) -> list[str]:
        """The scopes read that hold rows (a solo scope nobody has written to has no id yet)."""
        return [s.id for s in self.scopes if s.id is not None]

    @property
    def limit(self) -> int:
        """Candidates each channel contributes before fusion."""
        return max(self.settings.candidates, self.top_k)

    @property
    def kinds(self) -> Sequence[ItemKind]:
        """The corpora searched, facts first."""
        return (ItemKind.FACT, ItemKind.EPISODE) if self.include_episodes else (ItemKind.FACT,)

    @property
    def channels(self) -> frozenset[str]:
        """The channels switched on (names as configured; a `Channel` compares equal to its name)."""
        return frozenset(self.settings.channels)

    @property
    def hot(self) -> bool:
        """Whether facts statements are limited to hot facts (and digests expanded)."""
        return self.tier == "hot"

    def binds(self, **extra: Any) -> dict[str, Any]:
        """Bind values of a statement that needs no query vector, with `extra` added or replacing."""
        return {"scope_ids": self.scope_ids, "at": self.at, "embedding": None, "query": self.query,
                "tier": self.tier, **extra}

    async def embedding(self) -> np.ndarray:
        """The query's vector, waiting for the worker thread when it is not done yet."""
        if self.vector is None:
            raise ValueError("a search without a query has no vector")
        return await self.vector

    async def vector_binds(self, **extra: Any) -> dict[str, Any]:
        """Bind values of a channel statement that needs the vector: the query's, and `limit` candidates."""
        return self.binds(embedding=await self.embedding(), limit=self.limit, **extra)
