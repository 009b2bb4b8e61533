"""Clusters and islands of the dashboard's layout, on graphs whose right answer is known by construction."""

from __future__ import annotations

import math
from itertools import combinations

from echo_memory.services.audit import graph_layout as gl


def clique(prefix: str, size: int) -> list[gl.Edge]:
    return [gl.Edge(f"{prefix}{a}-{b}", f"{prefix}{a}", f"{prefix}{b}") for a, b in combinations(range(size), 2)]


def two_cliques_and_an_island() -> list[gl.Edge]:
    # Two dense groups joined by one bridge, plus a pair no one links to; the hub `a0` has extra edges.
    edges = clique("a", 8) + clique("b", 8) + [gl.Edge("bridge", "a7", "b0"), gl.Edge("lone", "x", "y")]
    edges += [gl.Edge(f"spoke{i}", "a0", f"s{i}") for i in range(3)]
    return edges


def test_communities_named_after_their_best_connected_member() -> None:
    edges = two_cliques_and_an_island()
    layout = gl.cluster(edges)
    assert layout.components == 2
    groups = {frozenset(c.members) for c in layout.clusters.values()}
    assert frozenset({f"b{i}" for i in range(8)}) in groups
    a_cluster = layout.clusters[layout.cluster_of["a1"]]
    assert a_cluster.id == "a0" and a_cluster.members[0] == "a0"  # the hub names it
    assert layout.cluster_of["x"] == layout.cluster_of["y"]
    assert layout.links[tuple(sorted((layout.cluster_of["a7"], layout.cluster_of["b0"])))] == 1  # type: ignore[index]
    assert sum(c.internal_edges for c in layout.clusters.values()) + sum(layout.links.values()) == len(edges)


def test_same_edges_same_picture_and_islands_apart() -> None:
    edges = two_cliques_and_an_island()
    first, second = gl.cluster(edges), gl.cluster(list(reversed(edges)))
    for layout in (first, second):
        gl.place_clusters(layout)
        gl.place_members(layout, {c.id: c.members for c in layout.clusters.values()}, edges)
    assert first.cluster_of == second.cluster_of
    assert first.positions == second.positions
    # The island {x, y} lies outside the disc that holds the other component.
    main = [p for n, p in first.positions.items() if n not in ("x", "y")]
    cx, cy = sum(x for x, _ in main) / len(main), sum(y for _, y in main) / len(main)
    reach = max(math.hypot(x - cx, y - cy) for x, y in main)
    assert all(math.hypot(x - cx, y - cy) > reach for x, y in (first.positions["x"], first.positions["y"]))
    assert len(set(first.positions.values())) == len(first.positions)  # no two entities on one spot
