"""Fusion: one ranking from the channels' candidates. Pure, so the eval sweep can re-run it.

Dense is the primary signal; BM25 is an additive boost normalised by the best lexical score of
the query (weights per corpus, because exact words matter far more for chat turns than for
one-line facts), with two lexical refinements on the same scale: coordination (more weight when
an item matches three or more distinct query words) and proximity (query word pairs that occur
close together, in order, in the item); PageRank adds a small graph boost to facts. Turns that
ask a question pass a share of their value to the reply (the next turn of the session) and keep
a little less themselves: a question in the conversation matches a later question about the same
thing in words and meaning, but the answer is in the reply. Then a turn inherits a share of the
best adjacent turn's value (evidence often sits next to the match). Each corpus' fused value is
divided by its largest possible boost, so facts and turns stay on the cosine's scale when both
are ranked together.
"""

from __future__ import annotations

from collections.abc import Iterable

from services.retrieval.channels import Candidate, Pool
from services.retrieval.settings import FusionWeights

# A candidate earns the coordination boost when it matches this many distinct query terms, or
# every term of a shorter query (so a one-word identifier lookup still counts as exact).
COORDINATION_TERMS = 3


def fuse(pool: Pool, weights: FusionWeights, channels: Iterable[str]) -> list[tuple[Candidate, float]]:
    """Candidates best first with their fused value; ties broken by cosine, then id (stable)."""
    on = set(channels)
    max_lex = {kind: max((c.lex for c in pool.values() if c.kind == kind), default=0.0) for kind in ("fact", "episode")}
    max_graph = max((c.graph for c in pool.values()), default=0.0)
    lex_weight = {"fact": weights.fact_lexical, "episode": weights.episode_lexical}
    coord_weight = {"fact": weights.fact_coordination, "episode": weights.episode_coordination}
    prox_weight = {"fact": weights.fact_proximity, "episode": weights.episode_proximity}

    base: dict[str, float] = {}
    for cand in pool.values():
        value = cand.cos if "dense" in on else 0.0
        if "lexical" in on and max_lex[cand.kind] > 0 and cand.lex > 0:
            top = max_lex[cand.kind]
            value += lex_weight[cand.kind] * cand.lex / top
            if cand.terms and cand.matched >= min(COORDINATION_TERMS, cand.terms):
                value += coord_weight[cand.kind] * cand.lex / top
            value += prox_weight[cand.kind] * cand.prox / top
        if "graph" in on and cand.kind == "fact" and max_graph > 0:
            value += weights.graph * cand.graph / max_graph
        base[cand.id] = value

    if "neighbour" in on:
        base = _credit_replies(pool, base, weights)

    fused: list[tuple[Candidate, float]] = []
    for cand in pool.values():
        value = base[cand.id]
        if "neighbour" in on and cand.neighbours:
            value += weights.neighbour * max(base[n] for n in cand.neighbours if n in base)
        lexical = lex_weight[cand.kind] + coord_weight[cand.kind] + prox_weight[cand.kind] if "lexical" in on else 0
        if cand.kind == "episode":
            scale = 1 + lexical + (weights.neighbour + weights.reply if "neighbour" in on else 0)
        else:
            scale = 1 + lexical + (weights.graph if "graph" in on else 0)
        fused.append((cand, value / scale))
    fused.sort(key=lambda item: (-item[1], -item[0].cos, item[0].id))
    return fused


def _credit_replies(pool: Pool, base: dict[str, float], weights: FusionWeights) -> dict[str, float]:
    """Each question turn whose reply is a candidate gives it `reply` × its value, keeping
    (1 − question_penalty) × its value; other values are unchanged. Uses the values before any
    credit, so a chain of questions does not compound."""
    credited = dict(base)
    for cand in pool.values():
        if cand.reply is not None and cand.reply in base:
            credited[cand.reply] += weights.reply * base[cand.id]
            credited[cand.id] -= weights.question_penalty * base[cand.id]
    return credited


def channels_of(cand: Candidate, on: Iterable[str]) -> list[str]:
    """The channels that found a candidate, in a fixed order; `neighbour` when only adjacency did."""
    found = set(cand.channels)
    if not found and cand.neighbours and "neighbour" in set(on):
        found.add("neighbour")
    return [name for name in ("dense", "lexical", "graph", "neighbour") if name in found]
