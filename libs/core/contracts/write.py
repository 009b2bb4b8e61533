"""write_episode: the agent's extraction of one turn, stored as entities and fact edges."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import CausalHint, Confidence, StrictModel
from echo_memory.libs.core.contracts.errors import ErrorInfo

MAX_ENTITIES = 50
MAX_FACTS = 50
MAX_FACT_CHARS = 2000
MAX_NAME_CHARS = 200
MAX_SOURCE_EPISODES = 20


class EntityIn(StrictModel):
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="as the conversation names it")
    type: str = Field(min_length=1, max_length=64, description="person, service, library, decision, …")
    aliases: list[str] = Field(default_factory=list, max_length=20, description="other names, exact match only")


class FactIn(StrictModel):
    source: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="name of an entity in this call")
    target: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="name of an entity in this call")
    relation: str = Field(min_length=1, max_length=100, description="short verb phrase, e.g. uses, prefers")
    fact: str = Field(min_length=1, max_length=MAX_FACT_CHARS, description="the claim as one sentence")
    confidence: Confidence = Field(description="extracted: said outright; inferred: concluded; ambiguous: unsure")
    causal_hint: CausalHint | None = Field(None, description="how source relates causally to target")


class EntityResolution(StrictModel):
    mention: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="the name a deferral asked about")
    entity_id: str = Field(min_length=1, max_length=64, description='an existing entity id, or "new"')
    rationale: str | None = Field(None, max_length=500, description="why you chose it, kept in the audit log")


class WriteEpisodeInput(StrictModel):
    scope: str | None = Field(None, max_length=100, description="shared (default), solo, or a named scope")
    session_id: str = Field(min_length=1, max_length=200, description="your conversation's id, kept with every fact")
    project: str | None = Field(None, max_length=200, description="the project this is about, kept as provenance")
    entities: list[EntityIn] = Field(default_factory=list, max_length=MAX_ENTITIES,
                                     description="every entity the facts name, each with a type")
    facts: list[FactIn] = Field(default_factory=list, max_length=MAX_FACTS,
                                description="claims between those entities, one sentence each")
    entity_resolutions: list[EntityResolution] = Field(
        default_factory=list, max_length=MAX_ENTITIES,
        description="answers to a deferred write: which stored entity (or \"new\") each mention names")
    idempotency_key: str | None = Field(None, min_length=1, max_length=200,
                                        description="the same key on a retry returns the first answer, never a second write")
    source_episode_ids: list[str] = Field(
        default_factory=list, max_length=MAX_SOURCE_EPISODES,
        description="episodes these facts were distilled from (ids pending_episodes returned); each must exist "
        "in a scope you may read",
    )


class EdgeRef(BaseModel):
    fact_id: str
    source: str
    target: str
    relation: str
    supersedes: str | None = Field(None, description="id of the edge this one ended, if any")


class Candidate(BaseModel):
    """A stored entity the mention may name."""

    entity_id: str
    name: str
    similarity: float = Field(description="cosine between the mention's and the entity's name vectors")
    score: float = Field(0.0, description="resolution score in [0, 1]: the rule's prior moved a little by the cosine")
    rule: str = Field("unexplained", description="why it is a candidate: typo, acronym, abbreviation, nickname, …")
    matched_name: str | None = Field(None, description="the stored name or alias the mention was compared with")


class DeferredMention(BaseModel):
    """A mention that may name a stored entity: nothing touching it was stored; answer and send again."""

    mention: str
    candidates: list[Candidate]
    waiting_facts: list[int] = Field(default_factory=list, description="1-based positions of the facts that wait")
    answer: str = Field("", description="what to send back in the next call")


class AliasedMention(BaseModel):
    """A mention recognised as another spelling of a stored entity and recorded as its alias."""

    mention: str
    entity_id: str
    entity: str = Field(description="the stored entity's name")
    rule: str = Field(description="same_form: case, punctuation, spacing, diacritics, plural or article only")
    score: float


NotStored = Literal["refused", "deferred", "unchanged", "no_facts"]


class WriteEpisodeResult(BaseModel):
    """Every key is always present, whatever happened."""

    stored: bool
    not_stored: NotStored | None = None
    partial: bool = False
    edges_created: list[EdgeRef] = Field(default_factory=list)
    restated: list[EdgeRef] = Field(default_factory=list)
    deferred: list[DeferredMention] = Field(default_factory=list)
    aliased: list[AliasedMention] = Field(default_factory=list)
    retryable: bool = False
    error: ErrorInfo | None = None
    scope: str | None = None
