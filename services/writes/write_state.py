"""One write_episode request's state: created once per request and handed to every step.

`EpisodeWrite` carries the request (connection, caller, arguments, model), the call's mentions
keyed by every name and alias, the vectors computed for them, and what each step decides: the
scope, the clock read under the scope's lock, the resolution thresholds, the facts to write, the
restatements and deferrals, the episode row and the edges written. The steps are in episode.py
(the transaction: shape, scope, classify, inserts, audit, outbox) and entities.py (which stored
entity each mention means); each reads and records on this object, so episode.write_episode is the
one place that spells out their order.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import psycopg

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.write import (
    AliasedMention,
    Candidate,
    DeferredMention,
    EdgeRef,
    EntityIn,
    FactIn,
    NotStored,
    WriteEpisodeInput,
    WriteEpisodeResult,
)
from echo_memory.libs.server.embed import MiniLM, settle
from echo_memory.libs.server.store.access import Scope
from echo_memory.libs.server.telemetry import steps

if TYPE_CHECKING:  # entities.py imports this module; the thresholds' type is all this one needs
    from echo_memory.services.writes.entities import Thresholds

How = Literal["exact", "alias", "agent-confirmed", "variant", "new"]


def key(name: str) -> str:
    """How mentions are compared: trimmed and lower-cased like Postgres lower(), nothing fuzzier."""
    return name.strip().lower()


@dataclass(frozen=True)
class Choice:
    """The call's explicit resolution of a mention (`entity_resolutions`): an entity id or "new", and why."""

    entity_id: str
    rationale: str | None

    @property
    def is_new(self) -> bool:
        return self.entity_id.lower() == "new"


# Compared and hashed by identity: one object per entity of the call, however many names it has.
@dataclass(eq=False)
class Mention:
    """One entity of the call, after merging mentions that name it."""

    name: str
    type: str
    aliases: list[str] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    how: How = "new"
    entity_id: str | None = None
    stored_name: str | None = None
    candidates: list[Candidate] = field(default_factory=list)
    variant: Candidate | None = None  # the stored entity this mention was resolved to as a spelling variant
    rejected: list[Candidate] = field(default_factory=list)  # candidates the agent answered "new" to
    rationale: str | None = None
    learned: list[str] = field(default_factory=list)
    created: bool = False
    # Declared "new" though the scope already holds an entity of that name (e.g. a retry of the
    # call that created it): resolved to that entity, and refused only if it would change a claim.
    new_but_exists: str | None = None
    # Some fact of the call uses it: only such mentions are matched, embedded and stored.
    referenced: bool = False
    choice: Choice | None = None
    waiting_facts: list[int] = field(default_factory=list)  # positions (from 1) of the facts its deferral holds

    @property
    def deferred(self) -> bool:
        return bool(self.candidates)

    @property
    def display(self) -> str:
        """The name responses use: the stored entity's name once resolved."""
        return self.stored_name or self.name

    @property
    def names(self) -> list[str]:
        return [self.name, *self.aliases]

    def needs_vector(self) -> bool:
        """True unless the mention is already resolved or the call names its entity by id."""
        if self.entity_id is not None:
            return False
        return self.choice is None or self.choice.is_new


@dataclass
class PlannedFact:
    """A fact the write stores: its resolved endpoints and the active edge it replaces, if any."""

    fact: FactIn
    source: Mention
    target: Mention
    relation: str
    active: dict[str, Any] | None
    index: int  # the fact's position in the call, which is also its vector's

    @property
    def supersedes(self) -> str | None:
        return str(self.active["id"]) if self.active is not None else None

    @property
    def hint_added_later(self) -> bool:
        """True when the only change to the active edge is a causal hint it did not have."""
        return (
            self.active is not None
            and self.active["causal_hint"] is None
            and self.fact.causal_hint is not None
            and self.active["text"] == self.fact.fact
            and self.active["confidence"] == self.fact.confidence
        )


@dataclass(eq=False)
class EpisodeWrite:
    """A write_episode request from its mentions to its result; the steps fill the later fields in order."""

    conn: psycopg.AsyncConnection
    caller: Caller
    args: WriteEpisodeInput
    embedder: MiniLM
    # Every key (name or alias) of the call mapped to its merged Mention.
    by_key: dict[str, Mention] = field(init=False)
    vectors: dict[str, np.ndarray] = field(init=False, default_factory=dict)  # by mention name
    scope: Scope = field(init=False, repr=False)
    now: datetime = field(init=False, repr=False)  # the clock under the scope's lock: every version's time
    limits: Thresholds = field(init=False, repr=False)
    planned: list[PlannedFact] = field(init=False, default_factory=list)
    restated: list[EdgeRef] = field(init=False, default_factory=list)
    deferred: list[DeferredMention] = field(init=False, default_factory=list)
    endpoints: list[Mention] = field(init=False, default_factory=list)  # mentions of the facts written, once each
    episode_id: str = field(init=False, repr=False)
    created: list[EdgeRef] = field(init=False, default_factory=list)
    declared_new: list[str] = field(init=False, default_factory=list)
    _fact_job: asyncio.Task[np.ndarray] | None = field(init=False, default=None)
    _new_job: asyncio.Task[np.ndarray] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.by_key = _call_entities(self.args)
        for fact in self.args.facts:
            self.by_key[key(fact.source)].referenced = True
            self.by_key[key(fact.target)].referenced = True

    def mentions(self) -> list[Mention]:
        """Each Mention once, in the call's order."""
        return list(dict.fromkeys(self.by_key.values()))

    def mention(self, name: str) -> Mention:
        """The Mention a name or alias of the call stands for."""
        return self.by_key[key(name)]

    def taken(self) -> set[str]:
        """Stored entities some mention of the call resolves to: never a candidate for another."""
        return {m.entity_id for m in self.mentions() if m.entity_id is not None}

    def start_embedding(self) -> None:
        """Start embedding the facts' texts and the names the call declares new, each in its own thread.

        Embedding is the slow part of a write (onnxruntime releases the GIL), and these vectors
        are needed only at insert time; names declared new become entities whatever the store holds.
        """
        self.declared_new = self._declared_new()
        texts = [f.fact for f in self.args.facts]
        self._fact_job = asyncio.create_task(asyncio.to_thread(_embed, self.embedder, texts, "embed_facts"))
        if self.declared_new:
            self._new_job = asyncio.create_task(
                asyncio.to_thread(_embed, self.embedder, self.declared_new, "embed_names"))

    async def embed_names(self, names: list[str]) -> None:
        """Vectors for `names`, computed now and kept by name."""
        embedded: np.ndarray | list[np.ndarray] = (
            await asyncio.to_thread(_embed, self.embedder, names, "embed_names") if names else []
        )
        self.vectors = dict(zip(names, embedded, strict=True))

    async def await_new_names(self) -> None:
        """The declared-new names' vectors, started with the write."""
        if self._new_job is not None:
            with steps.step("wait_name_vectors"):
                self.vectors.update(zip(self.declared_new, await self._new_job, strict=True))

    async def fact_vectors(self) -> np.ndarray:
        assert self._fact_job is not None, "start_embedding runs first"
        return await self._fact_job

    async def settle(self) -> None:
        """Wait for (or cancel) the embedding threads, whatever the write's outcome."""
        if self._fact_job is not None:
            await settle(self._fact_job)
        if self._new_job is not None:
            await settle(self._new_job)

    def not_stored(self) -> WriteEpisodeResult:
        outcome: NotStored = "deferred" if self.deferred else "unchanged"
        return WriteEpisodeResult(
            stored=False, not_stored=outcome, restated=self.restated, deferred=self.deferred, scope=self.scope.name
        )

    def stored(self) -> WriteEpisodeResult:
        aliased = [
            AliasedMention(mention=m.name, entity_id=m.variant.entity_id, entity=m.variant.name, rule=m.variant.rule,
                           score=m.variant.score)
            for m in self.endpoints if m.variant is not None
        ]
        return WriteEpisodeResult(
            stored=True,
            partial=bool(self.deferred),
            edges_created=self.created,
            restated=self.restated,
            deferred=self.deferred,
            aliased=aliased,
            scope=self.scope.name,
        )

    def _declared_new(self) -> list[str]:
        """Names of the mentions some fact uses that an `entity_resolutions` entry declares "new", once each.

        Conflicting resolutions are not judged here: entities.record_choices refuses them, after
        the scope check.
        """
        names: dict[str, None] = {}
        for resolution in self.args.entity_resolutions:
            mention = self.mention(resolution.mention)
            if resolution.entity_id.strip().lower() == "new" and mention.referenced:
                names.setdefault(mention.name)
        return list(names)


def _call_entities(args: WriteEpisodeInput) -> dict[str, Mention]:
    """Every key (name or alias) of the call mapped to its merged Mention."""
    by_key: dict[str, Mention] = {}
    # A resolution's mention that names no declared entity is an entity of unknown type.
    declared = [*args.entities, *(EntityIn(name=r.mention, type="unknown") for r in args.entity_resolutions)]
    for entity in declared:
        names = [entity.name, *entity.aliases]
        keys = [key(n) for n in names]
        existing = next((by_key[k] for k in keys if k in by_key), None)
        if existing is None:
            existing = Mention(name=entity.name, type=entity.type)
        for name, k in zip(names, keys, strict=True):
            if k not in existing.keys:
                existing.keys.add(k)
                if k != key(existing.name):
                    existing.aliases.append(name)
        for k in existing.keys:
            by_key[k] = existing
    return by_key


def _embed(embedder: MiniLM, texts: list[str], step: str) -> np.ndarray:
    """The model's vectors for `texts`, timed as `step` when a profiler collects (runs in a worker thread)."""
    with steps.step(step):
        return embedder.embed(texts)
