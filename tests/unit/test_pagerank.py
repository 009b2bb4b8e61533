"""The graph channel's PageRank gives networkx's own answer, faster.

`personalized_pagerank` reimplements networkx's power iteration with the transposed matrix built
once; these graphs (weights, parallel edges merged, self-loops, an isolated node, seeds of
different weights) hold it to `nx.pagerank` itself.
"""

from __future__ import annotations

import random

import networkx as nx
import pytest

from echo_memory.services.retrieval.channels import personalized_pagerank


def _graph(seed: int) -> nx.Graph:
    rng = random.Random(seed)
    g = nx.Graph()
    nodes = [f"e{i}" for i in range(rng.randint(5, 120))]
    for _ in range(len(nodes) * 2):
        source, target = rng.choice(nodes), rng.choice(nodes)
        weight = g.get_edge_data(source, target, {"weight": 0})["weight"] + 1
        g.add_edge(source, target, weight=weight)
    g.add_node("lonely")  # no edges at all: a dangling node
    return g


@pytest.mark.parametrize("seed", range(12))
def test_matches_networkx(seed: int) -> None:
    g = _graph(seed)
    rng = random.Random(seed + 100)
    seeds = rng.sample(list(g), k=min(3, len(g)))
    personalization = {node: 0.0 for node in g} | {seeds[0]: 2.0} | {s: 1.0 for s in seeds[1:]}
    ours = personalized_pagerank(g, personalization)
    theirs = nx.pagerank(g, alpha=0.85, personalization=personalization, weight="weight", max_iter=200, tol=1e-6)
    assert ours.keys() == theirs.keys()
    assert max(abs(ours[n] - theirs[n]) for n in g) < 1e-12
    assert abs(sum(ours.values()) - 1) < 1e-9


def test_empty_graph_and_no_seed() -> None:
    assert personalized_pagerank(nx.Graph(), {}) == {}
    g = nx.Graph([("a", "b")])
    with pytest.raises(ZeroDivisionError):
        personalized_pagerank(g, {"a": 0.0, "b": 0.0})
