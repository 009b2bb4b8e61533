"""The dashboard's read verbs: dashboard_graph, entity_facts, recall_cost.

Reads only, within the scopes the caller may read (`echo_memory.libs.server.store.access`); an entity in a scope the
caller may not read is reported as not found, like an unknown id. The SQL is in the
`dashboard_*.sql` files next to this module.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any, Literal

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.dashboard import (
    CLUSTER_NODES,
    AgentRecallCost,
    Cluster,
    ClusterLink,
    DayRecallCost,
    EntityFact,
    EntityFactsInput,
    EntityFactsResult,
    FilterChoices,
    GraphEdge,
    GraphFilter,
    GraphInput,
    GraphNode,
    GraphResult,
    RecallCostInput,
    RecallCostResult,
)
from echo_memory.libs.core.contracts.demo import is_demo_scope
from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound
from echo_memory.libs.core.contracts.instants import Instant, parse_span
from echo_memory.libs.server.store.access import Scope, public_name, resolve_read_scopes
from echo_memory.libs.server.store.fact_tokens import full_dump_tokens
from echo_memory.services.audit import graph_layout
from echo_memory.services.audit.access import readable_scopes


@cache
def sql(name: str) -> str:
    """The statement in `services/audit/<name>.sql`."""
    return resources.files("echo_memory.services.audit").joinpath(f"{name}.sql").read_text(encoding="utf-8")


async def dashboard_graph(conn: psycopg.AsyncConnection, caller: Caller, args: GraphInput) -> GraphResult:
    """The graph of the facts valid at `as_of` that match the filters.

    Up to `detail_edges` edges: the whole graph (`detail`). Above it: clusters as super-nodes and
    the links between them (`overview`); ask again with `cluster` for one cluster (`cluster`), cut
    to its CLUSTER_NODES best-connected entities with a `note` when it is bigger. No matching fact:
    empty lists. Raises InvalidArgument for a bad time or since after until, NotFound for a
    `cluster` id that is not a cluster of this graph, ScopeDenied/NotFound for a scope.
    """
    scopes = await _scopes(conn, caller, args.scope, args.include_demo)
    params = _filter_params(args, scopes)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql("dashboard_graph_facts"), params)
        rows = await cur.fetchall()
        choices = await _choices(cur, scopes, await readable_scopes(conn, caller))
    edges = [graph_layout.Edge(id=str(r["id"]), source=str(r["source_entity"]), target=str(r["target_entity"]))
             for r in rows]
    layout = graph_layout.cluster(edges)
    base: dict[str, Any] = {"as_of": params["at"], "total_nodes": len(layout.degree), "total_edges": len(edges),
                            "components": layout.components, "choices": choices}
    if not edges:
        return GraphResult(view="detail", **base)
    graph_layout.place_clusters(layout)
    if args.cluster is None and len(edges) > args.detail_edges:
        return GraphResult(view="overview", clusters=await _clusters(conn, layout, scopes), links=[
            ClusterLink(source=a, target=b, edges=n) for (a, b), n in sorted(layout.links.items())
        ], **base)

    note = None
    view: Literal["detail", "cluster"]
    if args.cluster is not None:
        found = layout.clusters.get(args.cluster)
        if found is None:
            raise NotFound(f"no cluster {args.cluster[:64]} in this graph (clusters change as filters and as_of do)")
        shown = found.members[:CLUSTER_NODES]
        if len(found.members) > CLUSTER_NODES:
            note = (f"cluster {found.id} has {len(found.members)} entities; showing its {CLUSTER_NODES} "
                    "best-connected ones and the facts among them")
        members = {found.id: shown}
        view = "cluster"
    else:
        members = {c.id: c.members for c in layout.clusters.values()}
        view = "detail"
    graph_layout.place_members(layout, members, edges)
    chosen = set(layout.positions)
    entities = await _entities(conn, scopes, sorted(chosen))
    nodes = [GraphNode(id=n, name=entities[n]["name"], type=entities[n]["type"],
                       scope=public_name(entities[n]["scope_name"]), cluster=layout.cluster_of[n],
                       degree=layout.degree[n], x=round(x, 3), y=round(y, 3))
             for n, (x, y) in sorted(layout.positions.items())]
    shown_edges = [_edge(r) for r in rows if str(r["source_entity"]) in chosen and str(r["target_entity"]) in chosen]
    if view == "cluster":
        shown_edges = [e for e in shown_edges if layout.cluster_of[e.source] == layout.cluster_of[e.target]]
    clusters = await _clusters(conn, layout, scopes, only=set(members))
    return GraphResult(view=view, nodes=nodes, edges=shown_edges, clusters=clusters, note=note, **base)


async def entity_facts(conn: psycopg.AsyncConnection, caller: Caller, args: EntityFactsInput) -> EntityFactsResult:
    """Every fact version the entity takes part in (as source or target) that matches the filters.

    Ended versions are included, marked `valid_at_as_of` false. Raises InvalidArgument for an id
    that is not a UUID or a bad time; NotFound when no entity with that id is in a readable scope.
    """
    entity_id = _uuid(args.entity_id, "entity_id")
    # Naming an entity by id is asking for it, demo data included.
    scopes = await _scopes(conn, caller, args.scope, include_demo=True)
    params = _filter_params(args, scopes)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql("dashboard_entity"), {"entity_id": entity_id, "scope_ids": params["scope_ids"]})
        entity = await cur.fetchone()
        if entity is None:
            raise NotFound(f"no entity {entity_id} in the scopes this token may read")
        await cur.execute(sql("dashboard_entity_facts"),
                          {**params, "entity_id": entity_id, "scope_id": entity["scope_id"], "limit": args.limit})
        rows = await cur.fetchall()
    total = int(rows[0]["total"]) if rows else 0
    facts = [EntityFact(fact_id=str(r["id"]), text=r["text"], source=r["source"], target=r["target"],
                        relation=r["relation"], role=r["role"], agent_id=r["agent_id"], tool=r["tool"],
                        project=r["project"], session_id=r["session_id"], written_at=r["written_at"],
                        valid_from=r["t_valid"], valid_until=r["t_invalid"], valid_at_as_of=bool(r["valid_at"]),
                        flags=list(r["flags"] or []))
             for r in rows]
    return EntityFactsResult(entity_id=entity_id, name=entity["name"], type=entity["type"],
                             scope=public_name(entity["scope_name"]), aliases=list(entity["aliases"]),
                             as_of=params["at"], total=total, more=total > len(facts), facts=facts)


async def recall_cost(conn: psycopg.AsyncConnection, caller: Caller, args: RecallCostInput) -> RecallCostResult:
    """Reads of the scopes, what they returned and cost, per agent and per day (UTC), oldest day first.

    All zeros and empty lists when nothing was read. Raises InvalidArgument for a bad time or
    since after until; ScopeDenied/NotFound for a scope.
    """
    scopes = await _scopes(conn, caller, args.scope, args.include_demo)
    since, until = _window(args.since, args.until)
    params = {"scope_ids": [s.id for s in scopes], "scope_names": [s.stored_name for s in scopes],
              "agent": args.agent, "since": since, "until": until}
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql("dashboard_recall_cost"), params)
        rows = await cur.fetchall()
    dump = await full_dump_tokens(conn, [s.stored_name for s in scopes])
    agents: dict[str, AgentRecallCost] = {}
    days: dict[str, DayRecallCost] = {}
    for r in rows:
        a = agents.setdefault(r["agent_id"], AgentRecallCost(agent_id=r["agent_id"], reads=0, reads_with_results=0,
                                                             facts_returned=0, episodes_returned=0, tokens=0))
        a.reads += int(r["reads"])
        a.reads_with_results += int(r["with_results"])
        a.facts_returned += int(r["facts"])
        a.episodes_returned += int(r["episodes"])
        a.tokens += int(r["tokens"])
        a.last_read = max(a.last_read, r["last_read"]) if a.last_read else r["last_read"]
        d = days.setdefault(r["day"], DayRecallCost(day=r["day"], reads=0, tokens=0))
        d.reads += int(r["reads"])
        d.tokens += int(r["tokens"])
    per_agent = sorted(agents.values(), key=lambda a: (-a.tokens, a.agent_id))
    return RecallCostResult(
        scopes=[s.name for s in scopes], reads=sum(a.reads for a in per_agent),
        reads_with_results=sum(a.reads_with_results for a in per_agent),
        facts_returned=sum(a.facts_returned for a in per_agent),
        episodes_returned=sum(a.episodes_returned for a in per_agent), tokens=sum(a.tokens for a in per_agent),
        full_dump_tokens=dump,
        agents=per_agent, days=[days[k] for k in sorted(days)],
    )


# ---- shared pieces -----------------------------------------------------------------------------


async def _scopes(conn: psycopg.AsyncConnection, caller: Caller, names: list[str] | None,
                  include_demo: bool = False) -> list[Scope]:
    """The scopes asked for (each checked), else every readable one; a solo scope with no row is left out."""
    if names is None:
        # The default view is the user's own memory: demo-seed's invented org only when asked.
        found = [s for s in await readable_scopes(conn, caller) if include_demo or not is_demo_scope(s.name)]
    else:
        found = await resolve_read_scopes(conn, caller, names) if names else []
    return [s for s in found if s.id is not None]


def _window(since: Instant | None, until: Instant | None) -> tuple[datetime | None, datetime | None]:
    start = parse_span(since, "since").start if since is not None else None
    end = parse_span(until, "until").end if until is not None else None  # inclusive of the unit it names
    if start is not None and end is not None and start >= end:
        raise InvalidArgument(f"since ({since}) is after until ({until})")
    return start, end


def _filter_params(args: GraphFilter, scopes: list[Scope]) -> dict[str, Any]:
    since, until = _window(args.since, args.until)
    # The last instant of the named second (minute, day): a write during it is visible as_of it.
    at = parse_span(args.as_of, "as_of").last if args.as_of is not None else datetime.now(tz=UTC)
    return {"scope_ids": [s.id for s in scopes], "agent": args.agent, "project": args.project,
            "since": since, "until": until, "at": at}


async def _choices(cur: psycopg.AsyncCursor[dict[str, Any]], scopes: list[Scope], readable: list[Scope]) -> FilterChoices:
    await cur.execute(sql("dashboard_filter_choices"), {"scope_ids": [s.id for s in scopes]})
    row = await cur.fetchone()
    assert row is not None  # an aggregate over scalar subqueries always returns one row
    return FilterChoices(scopes=[s.name for s in readable], agents=list(row["agents"]), projects=list(row["projects"]),
                         first=row["first"], last=row["last"])


async def _entities(conn: psycopg.AsyncConnection, scopes: list[Scope], ids: list[str]) -> dict[str, dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql("dashboard_graph_entities"), {"scope_ids": [s.id for s in scopes], "ids": ids})
        return {str(r["id"]): r for r in await cur.fetchall()}


async def _clusters(conn: psycopg.AsyncConnection, layout: graph_layout.Layout, scopes: list[Scope],
                    only: set[str] | None = None) -> list[Cluster]:
    chosen = [c for c in layout.clusters.values() if only is None or c.id in only]
    top_ids = sorted({m for c in chosen for m in c.members[:5]})
    names = {k: v["name"] for k, v in (await _entities(conn, scopes, top_ids)).items()}
    return [Cluster(id=c.id, name=names[c.id], nodes=len(c.members), edges=c.internal_edges, component=c.component,
                    top=[names[m] for m in c.members[:5]], x=round(c.x, 3), y=round(c.y, 3))
            for c in sorted(chosen, key=lambda c: (-len(c.members), c.id))]


def _edge(r: dict[str, Any]) -> GraphEdge:
    return GraphEdge(id=str(r["id"]), source=str(r["source_entity"]), target=str(r["target_entity"]),
                     relation=r["relation"], agent_id=r["agent_id"], project=r["project"], written_at=r["written_at"])


def _uuid(value: str, name: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise InvalidArgument(f"{name} '{value[:64]}' is not an id (a UUID)") from None
