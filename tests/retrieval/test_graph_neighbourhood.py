"""The graph channel's neighbourhood: capped per hop, in a fixed order, inside the scope.

A hub entity with more edges than the cap must give the same edges on every call (the ranking
depends on them), and after its rows moved on disk, in id order, with the seeds' own edges chosen first and each frontier entity
contributing at most GRAPH_EDGES_PER_ENTITY edges each way.

Handler tier: written through the services' real routes on one rolled-back transaction; the
channel's statements run on that connection.
"""

from __future__ import annotations

from datetime import UTC, datetime

from echo_memory.libs.core.config.retrieval import RetrievalSettings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.server.store.access import Scope
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.retrieval import channels as ch
from echo_memory.services.retrieval.queries import GRAPH_EDGES_PER_ENTITY
from echo_memory.services.retrieval.request import Search

HUB = "core gateway"
SPOKES = 8
CAP = 5


def _edge(scope: str, source: str, target: str, new: list[str]) -> dict:
    return {
        "scope": scope, "session_id": "graph", "project": "graph",
        "entities": [{"name": source, "type": "service"}, {"name": target, "type": "service"}],
        "entity_resolutions": [{"mention": name, "entity_id": "new", "rationale": "test"} for name in new],
        "facts": [{"source": source, "target": target, "relation": "calls",
                   "fact": f"The {source} calls the {target}.", "confidence": "extracted"}],
    }


async def _build(handlers: Handlers, scope: str) -> None:
    await handlers.admin_call("writes", "scope_create", {"name": scope})
    for spoke in range(SPOKES):
        first = [HUB] if spoke == 0 else []
        episode = _edge(scope, HUB, f"spoke {spoke}", first + [f"spoke {spoke}"])
        stored = await handlers.admin_call("writes", "write_episode", episode)
        assert stored["stored"] is True, stored.get("error")
        for leaf in range(5):
            name = f"leaf {spoke}.{leaf}"
            stored = await handlers.admin_call("writes", "write_episode", _edge(scope, f"spoke {spoke}", name, [name]))
            assert stored["stored"] is True, stored.get("error")


def _search(scope_id: object, scope: str, query: str, tier: str = "all") -> Search:
    """A search of `tier` in `scope`, with the graph capped at CAP edges a hop."""
    return Search(caller=Caller(org="x", agent_id="test"), scopes=(Scope(str(scope_id), scope, scope),), query=query,
                  as_of=None, at=datetime.now(tz=UTC), tier=tier, top_k=10, include_episodes=True,
                  settings=RetrievalSettings(graph_edge_cap=CAP), model="none")


async def test_hub_neighbourhood_is_capped_ordered_and_the_same_every_time(handlers: Handlers) -> None:
    await _build(handlers, "graph-a")
    await _build(handlers, "graph-b")  # same names in another scope: none of its edges may appear
    conn = handlers.conn
    scope_id = (await (await conn.execute("SELECT id FROM scopes WHERE name = 'graph-a'")).fetchone())[0]  # type: ignore[index]
    search = _search(scope_id, "graph-a", f"what does the {HUB} call?")
    named = await ch.named_entities(conn, search)
    assert len(named) == 1
    runs = [await ch.graph_neighbourhood(conn, search, named) for _ in range(3)]
    hub_edges = await (await conn.execute(
        "SELECT id::text FROM facts WHERE scope_id = %s AND source_entity = %s::uuid ORDER BY id", (scope_id, named[0])
    )).fetchall()
    in_scope = {r[0] for r in await (await conn.execute(
        "SELECT id::text FROM facts WHERE scope_id = %s", (scope_id,)
    )).fetchall()}

    edges = runs[0]
    assert runs[1] == edges and runs[2] == edges
    ids = [e[0] for e in edges]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert set(ids) <= in_scope
    # First hop: the CAP lowest-id edges of the hub (it has SPOKES > CAP of them).
    first_hop = [r[0] for r in hub_edges][:CAP]
    assert set(first_hop) <= set(ids)
    # Second hop adds at most CAP more, each from a spoke reached in the first hop.
    assert CAP < len(ids) <= 2 * CAP
    reached = {e[2] for e in edges if e[0] in first_hop}
    second = [e for e in edges if e[0] not in first_hop]
    assert all(source in reached or target in reached for _, source, target in second)
    per_spoke: dict[str, int] = {}
    for _, source, _ in second:
        per_spoke[source] = per_spoke.get(source, 0) + 1
    assert max(per_spoke.values()) <= GRAPH_EDGES_PER_ENTITY

    # A spoke gives its lowest-id edges, wherever their rows sit: rows moved on disk (as the end of
    # a superseded version or a restore moves them) give the same neighbourhood.
    for spoke in reached:
        lowest = {r[0] for r in await (await conn.execute(
            "SELECT id::text FROM facts WHERE scope_id = %s AND source_entity = %s::uuid ORDER BY id LIMIT %s",
            (scope_id, spoke, GRAPH_EDGES_PER_ENTITY))).fetchall()}
        assert {e[0] for e in second if e[1] == spoke} <= lowest, spoke
    # Uncommitted, the updated rows are still new versions in other places than the old ones.
    await conn.execute("UPDATE facts SET token_count = token_count WHERE scope_id = %s AND md5(id::text) < '8'",
                       (scope_id,))
    assert await ch.graph_neighbourhood(conn, search, named) == edges


async def test_several_seeds_share_one_first_hop_cap_of_their_lowest_id_edges(handlers: Handlers) -> None:
    await _build(handlers, "graph-c")
    conn = handlers.conn
    scope_id = (await (await conn.execute("SELECT id FROM scopes WHERE name = 'graph-c'")).fetchone())[0]  # type: ignore[index]
    # Two seeds: the hub (edges out) and a spoke (an edge in from the hub, edges out to its leaves).
    search = _search(scope_id, "graph-c", f"what do the {HUB} and spoke 0 call?")
    named = await ch.named_entities(conn, search)
    assert len(named) == 2
    touching = [r[0] for r in await (await conn.execute(
        "SELECT id::text FROM facts WHERE scope_id = %s AND (source_entity = ANY(%s::uuid[]) OR target_entity = ANY(%s::uuid[]))"
        " ORDER BY id", (scope_id, named, named))).fetchall()]
    assert len(touching) > 2 * CAP  # more edges than the cap
    edges = await ch.graph_neighbourhood(conn, search, named)
    ids = {e[0] for e in edges}
    # The first hop is the CAP lowest-id edges of both seeds together, whichever seed and direction.
    assert set(touching[:CAP]) <= ids
    assert len(ids) <= 2 * CAP  # and the second hop at most CAP more


HUB_EDGES = """
SELECT f.id::text FROM facts f
WHERE f.scope_id = %(scope)s AND (f.source_entity = %(hub)s::uuid OR f.target_entity = %(hub)s::uuid)
ORDER BY f.id
"""


async def test_a_hot_search_walks_the_hot_edges_and_passes_over_the_consolidated(handlers: Handlers) -> None:
    await _build(handlers, "graph-d")
    conn = handlers.conn
    scope_id = (await (await conn.execute("SELECT id FROM scopes WHERE name = 'graph-d'")).fetchone())[0]  # type: ignore[index]
    hot, every = (_search(scope_id, "graph-d", f"what does the {HUB} call?", tier) for tier in ("hot", "all"))
    named = await ch.named_entities(conn, hot)
    hub = [r[0] for r in await (await conn.execute(HUB_EDGES, {"scope": scope_id, "hub": named[0]})).fetchall()]
    assert len(hub) == SPOKES
    # Nothing placed yet: every fact is hot, and both tiers see the same neighbourhood.
    assert await ch.graph_neighbourhood(conn, hot, named) == await ch.graph_neighbourhood(conn, every, named)

    # A run placed lower the hub's lowest-id edges (those the first hop took), one edge of the rest,
    # and every third of the other facts.
    others = [r[0] for r in await (await conn.execute(
        "SELECT id::text FROM facts WHERE scope_id = %s AND NOT (id::text = ANY(%s)) ORDER BY id", (scope_id, hub)
    )).fetchall()]
    placed = hub[:CAP] + [hub[CAP + 1]] + others[::3]
    await conn.execute("INSERT INTO fact_tiers (fact_id, tier) SELECT unnest(%s::uuid[]), 'consolidated' "
                        "ON CONFLICT DO NOTHING", (placed,))
    edges = await ch.graph_neighbourhood(conn, hot, named)
    ids = [e[0] for e in edges]
    assert ids and not set(ids) & set(placed)
    # The first hop is the hub's lowest-id hot edges, as the every-tier walk would give them.
    hot_hub = [fid for fid in hub if fid not in placed]
    assert len(hot_hub) == SPOKES - CAP - 1 and set(hot_hub) <= set(ids)
    assert ids == sorted(ids) and len(ids) <= 2 * CAP
    assert {e[0] for e in await ch.graph_neighbourhood(conn, every, named)} >= set(hub[:CAP])

    # Back in the hot tier (an undo), the hot walk sees them again.
    await conn.execute("DELETE FROM fact_tiers WHERE fact_id = ANY(%s::uuid[])", (placed,))
    assert await ch.graph_neighbourhood(conn, hot, named) == await ch.graph_neighbourhood(conn, every, named)
