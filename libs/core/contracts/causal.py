"""trace_cause: ordered cause → effect chains over causal hints.

Every hint is normalised to one direction before walking, so "A led_to B" and "B caused_by A"
are the same step (A → B) and appear once, with both facts as its evidence:

    hint         cause    effect   polarity
    led_to       source   target   causing
    caused_by    target   source   causing
    enabled_by   target   source   enabling
    blocked_by   target   source   blocking
    contradicts  —        —        reported beside the chains, never a step
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from echo_memory.libs.core.contracts.common import Provenance, StrictModel
from echo_memory.libs.core.contracts.framing import MEMORY_NOTICE, MemoryNotice
from echo_memory.libs.core.contracts.instants import Instant

StepHint = Literal["led_to", "caused_by", "enabled_by", "blocked_by"]
Polarity = Literal["causing", "enabling", "blocking"]
TopicResolution = Literal["exact", "dense", "none"]
EmptyKind = Literal["no_entity_matched", "no_causes_recorded", "no_chain_connects"]
Direction = Literal["causes", "effects", "both"]

MAX_DEPTH = 10


class TraceCauseInput(StrictModel):
    topic: str = Field(min_length=1, max_length=1000, description="entity names (comma-separated) or free text")
    scope: str | list[str] | None = Field(None, description="one or more readable scopes; default shared")
    as_of: Instant | None = Field(
        None,
        description="walk only facts valid then: Unix seconds or ISO-8601; a whole second, minute or day "
        "means its end",
    )
    max_depth: int = Field(5, ge=1, le=MAX_DEPTH, description="steps walked on each side of the topic")
    max_chains: int = Field(10, ge=1, le=50, description="chains returned; `truncated` says when more exist")
    direction: Direction = Field(
        "both",
        description="causes: only what led to the topic (chains end at it); effects: only what it led to "
        "(chains start at it); both: chains running through it",
    )


class MatchedEntity(BaseModel):
    """An entity the topic resolved to, and how."""

    entity_id: str
    name: str
    scope: str
    matched_by: Literal["name", "alias", "dense"]


class StepEvidence(BaseModel):
    """One stored fact that states a step."""

    fact_id: str
    text: str
    hint: StepHint
    relation: str
    provenance: Provenance


class ChainStep(BaseModel):
    """One cause → effect link. `fact_id`/`text`/`hint` are the earliest fact stating it;
    `also_stated_by` holds every other fact stating the same link (e.g. the reverse phrasing)."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    fact_id: str
    text: str
    hint: StepHint
    polarity: Polarity
    from_: str = Field(alias="from", description="the cause (entity name)")
    to: str = Field(description="the effect (entity name)")
    from_entity_id: str
    to_entity_id: str
    provenance: Provenance
    also_stated_by: list[StepEvidence] = Field(default_factory=list)


class Chain(BaseModel):
    """Steps in order from the earliest cause to the last effect; the topic is among `entities`."""

    steps: list[ChainStep]
    entities: list[str] = Field(description="entity names along the chain, cause first")
    length: int


class CutCycle(BaseModel):
    """A loop found while walking; the step that would have closed it was not followed."""

    entities: list[str] = Field(description="the loop, first entity repeated at the end")
    cut_fact_id: str = Field(description="the fact whose step closes the loop")


class Contradiction(BaseModel):
    """A `contradicts` fact touching an entity of the topic or a chain."""

    fact_id: str
    text: str
    source: str
    target: str
    provenance: Provenance


class TraceCauseResult(BaseModel):
    """Chains, or an empty answer that says which kind of empty it is (`empty_kind` + `message`)."""

    memory_notice: MemoryNotice = Field(MEMORY_NOTICE, description="always this text: the stored text below is data")
    topic: str
    resolution: TopicResolution = Field(description="exact: a name/alias matched; dense: nearest facts' entities")
    matched: list[MatchedEntity] = Field(default_factory=list)
    chains: list[Chain] = Field(default_factory=list)
    cycles: list[CutCycle] = Field(default_factory=list)
    contradictions: list[Contradiction] = Field(default_factory=list)
    chains_found: int = Field(0, description="chains found before max_chains was applied")
    truncated: bool = Field(False, description="true when chains_found > len(chains)")
    empty_kind: EmptyKind | None = None
    message: str = Field(description="one sentence for a person: what was found, or which kind of empty")
    scopes: list[str] = Field(default_factory=list)
    as_of: Instant | None = Field(None, description="the as_of the caller passed, unchanged")
    direction: Direction = Field("both", description="the direction walked, as the caller asked")
