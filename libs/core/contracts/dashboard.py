"""The dashboard's read verbs: the graph (whole, aggregated or one cluster), one entity's facts, recall cost.

All of them read only, within the scopes the caller may read. Entities are nodes and the facts
valid at `as_of` are edges; clusters come from label propagation over those edges and are named
after their best-connected entity; each connected component is laid out as its own island.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import StrictModel
from echo_memory.libs.core.contracts.framing import MEMORY_NOTICE, MemoryNotice
from echo_memory.libs.core.contracts.instants import Instant
from echo_memory.libs.core.hygiene.instructions import InstructionFlag

# Above this many edges the graph verb answers with clusters as super-nodes first.
DETAIL_EDGES = 3000
MAX_DETAIL_EDGES = 20_000
# A cluster shown in detail holds at most this many entities (its best connected ones).
CLUSTER_NODES = 1500
MAX_ENTITY_FACTS = 1000


class GraphFilter(StrictModel):
    scope: list[str] | None = Field(
        None, max_length=20, description="readable scopes by public name; default every scope the caller may read"
    )
    agent: str | None = Field(None, min_length=1, max_length=100, description="only facts this agent wrote")
    project: str | None = Field(None, min_length=1, max_length=200, description="only facts of this project")
    since: Instant | None = Field(None, description="only facts written at or after this instant")
    until: Instant | None = Field(None, description="only facts written before the end of this second/minute/day")
    as_of: Instant | None = Field(None, description="facts valid at this instant; default now")
    include_demo: bool = Field(False, description="with no scope named, also show demo-seed's scopes (demo, demo-*)")


class GraphInput(GraphFilter):
    cluster: str | None = Field(
        None, max_length=64, description="one cluster's id from an overview: that cluster in detail"
    )
    detail_edges: int = Field(
        DETAIL_EDGES, ge=1, le=MAX_DETAIL_EDGES, description="above this many edges, answer with the overview"
    )


class GraphNode(BaseModel):
    id: str
    name: str
    type: str
    scope: str
    cluster: str
    degree: int
    x: float
    y: float


class GraphEdge(BaseModel):
    id: str = Field(description="the fact id (ask `why` about it)")
    source: str
    target: str
    relation: str
    agent_id: str
    project: str | None = None
    written_at: datetime


class Cluster(BaseModel):
    """A label-propagation community; `id` is its best-connected entity's id, `name` that entity's name."""

    id: str
    name: str
    nodes: int
    edges: int = Field(description="facts with both ends inside the cluster")
    component: int
    top: list[str] = Field(default_factory=list, description="names of its best-connected entities, best first")
    x: float = 0.0
    y: float = 0.0


class ClusterLink(BaseModel):
    source: str
    target: str
    edges: int


class FilterChoices(BaseModel):
    """What the filters can offer: every readable scope; for the scopes read, who wrote, which projects, when."""

    scopes: list[str] = Field(description="every scope the caller may read, oldest first")
    agents: list[str]
    projects: list[str]
    first: datetime | None = Field(None, description="earliest valid_from of any fact; null when there is none")
    last: datetime | None = Field(None, description="latest write or end of validity")


class GraphResult(BaseModel):
    """`view` says what the lists hold: `detail` every node and edge; `overview` clusters as super-nodes
    (nodes and edges empty) and the links between them; `cluster` one cluster's nodes and edges.

    `note` says when the cluster shown is cut to its best-connected entities. Empty lists with zero
    totals mean no fact matches the filters.
    """

    memory_notice: MemoryNotice = Field(MEMORY_NOTICE, description="always this text: the stored text below is data")
    view: Literal["detail", "overview", "cluster"]
    as_of: datetime
    total_nodes: int
    total_edges: int
    components: int
    nodes: list[GraphNode] = Field(default_factory=list)
    edges: list[GraphEdge] = Field(default_factory=list)
    clusters: list[Cluster] = Field(default_factory=list)
    links: list[ClusterLink] = Field(default_factory=list)
    note: str | None = None
    choices: FilterChoices


class EntityFactsInput(GraphFilter):
    entity_id: str = Field(min_length=1, max_length=64)
    limit: int = Field(200, ge=1, le=MAX_ENTITY_FACTS)


class EntityFact(BaseModel):
    fact_id: str
    text: str
    source: str
    target: str
    relation: str
    role: Literal["source", "target"]
    agent_id: str
    tool: str | None = None
    project: str | None = None
    session_id: str | None = None
    written_at: datetime
    valid_from: datetime
    valid_until: datetime | None = None
    valid_at_as_of: bool = Field(description="true when the fact holds at the result's `as_of`")
    flags: list[InstructionFlag] = Field(
        default_factory=list, description="'instruction_like': the text addresses the agent reading it; else empty"
    )


class EntityFactsResult(BaseModel):
    """Every fact version the entity takes part in that matches the filters, newest first.

    `total` counts them all; `facts` holds the first `limit`, and `more` is true when it is cut.
    """

    memory_notice: MemoryNotice = Field(MEMORY_NOTICE, description="always this text: the stored text below is data")
    entity_id: str
    name: str
    type: str
    scope: str
    aliases: list[str] = Field(default_factory=list)
    as_of: datetime
    total: int
    more: bool
    facts: list[EntityFact]


class RecallCostInput(StrictModel):
    scope: list[str] | None = Field(None, max_length=20, description="readable scopes; default every readable one")
    agent: str | None = Field(None, min_length=1, max_length=100)
    since: Instant | None = None
    until: Instant | None = None
    include_demo: bool = Field(False, description="with no scope named, also count demo-seed's scopes (demo, demo-*)")


class AgentRecallCost(BaseModel):
    agent_id: str
    reads: int
    reads_with_results: int
    facts_returned: int
    episodes_returned: int
    tokens: int
    last_read: datetime | None = None


class DayRecallCost(BaseModel):
    day: str = Field(description="YYYY-MM-DD (UTC)")
    reads: int
    tokens: int


class RecallCostResult(BaseModel):
    """What recall cost in the scopes read: reads that searched any of them, what they returned.

    `full_dump_tokens` is what pasting every fact valid now in those scopes would cost, the figure
    recall is meant to beat. All zeros when nothing was read.
    """

    scopes: list[str]
    reads: int
    reads_with_results: int
    facts_returned: int
    episodes_returned: int
    tokens: int
    full_dump_tokens: int
    agents: list[AgentRecallCost] = Field(default_factory=list)
    days: list[DayRecallCost] = Field(default_factory=list)
