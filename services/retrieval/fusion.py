"""Fusion: one ranking from the channels' candidates. Pure, so the eval sweep can re-run it.

Dense is the primary signal; BM25 is an additive boost normalised by the best lexical score of
the query, or by `lexical_floor` × what an item holding every query term once would score when
the best match covers less of the query than that (so a long query's one shared word does not earn
the whole boost), with weights per corpus, because exact words matter far more for chat turns than
for one-line facts, and with two lexical refinements on the same scale: coordination (more weight when
an item matches three or more distinct query words) and proximity (query word pairs that occur
close together, in order, in the item); PageRank adds a small graph boost to facts. Turns that
ask a question pass a share of their value to the reply (the first turn after it that another
speaker said, channels.neighbours) and keep a little less themselves: a question in the conversation
matches a later question about the same thing in words and meaning, but the answer is in the
reply. Then a turn inherits a share of the best adjacent turn's value (evidence often sits next
to the match).

Fused values order items within their corpus only: BM25 is normalised per corpus, so the best
turn always gets the whole lexical boost, however weakly it matches, and the corpora's boosts
differ. Facts and turns are therefore merged on the cosine's scale (`_merge_corpora`); a store
that holds one corpus is ranked by its fused values alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from echo_memory.libs.core.config.retrieval import FusionWeights
from echo_memory.libs.core.contracts.query import Channel, ItemKind
from echo_memory.services.retrieval.channels import Candidate, Pool

# A candidate earns the coordination boost when it matches this many distinct query terms, or
# every term of a shorter query (so a one-word identifier lookup still counts as exact).
COORDINATION_TERMS = 3
# The order `matched` lists the channels that found an item in.
CHANNEL_ORDER = (Channel.DENSE, Channel.LEXICAL, Channel.GRAPH, Channel.NEIGHBOUR, Channel.VIA_DIGEST)


def fuse(pool: Pool, weights: FusionWeights, channels: Iterable[str]) -> list[tuple[Candidate, float]]:
    """Candidates best first with their fused value (comparable within a corpus only).

    Within a corpus: by fused value, ties broken by cosine, then id (stable). Facts and turns are
    interleaved by `_merge_corpora`.
    """
    on = set(channels)
    lex_norm = _lexical_norms(pool, weights.lexical_floor)
    max_graph = max((c.graph for c in pool.values()), default=0.0)
    lex_weight = {ItemKind.FACT: weights.fact_lexical, ItemKind.EPISODE: weights.episode_lexical}
    coord_weight = {ItemKind.FACT: weights.fact_coordination, ItemKind.EPISODE: weights.episode_coordination}
    prox_weight = {ItemKind.FACT: weights.fact_proximity, ItemKind.EPISODE: weights.episode_proximity}

    base: dict[str, float] = {}
    for cand in pool.values():
        value = cand.cos if Channel.DENSE in on else 0.0
        if Channel.LEXICAL in on and lex_norm[cand.kind] > 0 and cand.lex > 0:
            top = lex_norm[cand.kind]
            value += lex_weight[cand.kind] * cand.lex / top
            if cand.terms and cand.matched >= min(COORDINATION_TERMS, cand.terms):
                value += coord_weight[cand.kind] * cand.lex / top
            value += prox_weight[cand.kind] * cand.prox / top
        if Channel.GRAPH in on and cand.kind == ItemKind.FACT and max_graph > 0:
            value += weights.graph * cand.graph / max_graph
        base[cand.id] = value

    if Channel.NEIGHBOUR in on:
        base = _credit_replies(pool, base, weights)

    fused: list[tuple[Candidate, float]] = []
    for cand in pool.values():
        value = base[cand.id]
        if Channel.NEIGHBOUR in on and cand.neighbours:
            value += weights.neighbour * max(base[n] for n in cand.neighbours if n in base)
        fused.append((cand, value))
    fused.sort(key=lambda item: (-item[1], -item[0].cos, item[0].id))
    return _merge_corpora(fused)


def _lexical_norms(pool: Pool, floor: float) -> dict[ItemKind, float]:
    """Per corpus, what its BM25 scores are divided by: the best of them, or `floor` × the query's
    ideal score when that is larger (ts_rank rows carry no ideal, so the floor never acts there)."""
    best = dict.fromkeys((ItemKind.FACT, ItemKind.EPISODE), 0.0)
    ideal = dict.fromkeys(best, 0.0)
    for cand in pool.values():
        best[cand.kind] = max(best[cand.kind], cand.lex)
        ideal[cand.kind] = max(ideal[cand.kind], cand.lex_ideal)
    return {kind: max(best[kind], floor * ideal[kind]) for kind in best}


def _merge_corpora(fused: list[tuple[Candidate, float]]) -> list[tuple[Candidate, float]]:
    """Facts and turns in one ranking: each corpus keeps its fused order, and the n-th item of a
    corpus is placed as if its cosine were the n-th best cosine among that corpus' candidates.

    So a corpus' best item competes with the other corpus' best on how well either corpus
    matches the query at all. Measured in one scope holding agent-facts' 200 facts and LoCoMo
    conv-26's 419 turns: dividing each corpus' fused value by its largest possible boost instead
    let turns about someone's weekend take 2.45 of the top 10 for questions about the codebase
    (agent-facts hit@1 0.75 → 0.69); merged this way, 0.36, and both sets score as in their own
    scopes (lab/NOTES.md, "Facts and turns in one scope"). A one-corpus list is returned
    as it is.
    """
    cosines: dict[ItemKind, list[float]] = {}
    for cand, _ in fused:
        cosines.setdefault(cand.kind, []).append(cand.cos)
    if len(cosines) < 2:
        return fused
    for values in cosines.values():
        values.sort(reverse=True)
    placed: list[tuple[float, float, str, tuple[Candidate, float]]] = []
    taken = dict.fromkeys(cosines, 0)
    for cand, value in fused:
        placed.append((cosines[cand.kind][taken[cand.kind]], value, cand.id, (cand, value)))
        taken[cand.kind] += 1
    placed.sort(key=lambda item: (-item[0], -item[1], item[2]))
    return [item for *_, item in placed]


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


def channels_of(cand: Candidate, on: Iterable[str]) -> tuple[Channel, ...]:
    """The channels that found a candidate, in CHANNEL_ORDER; `neighbour` when only adjacency did."""
    found = set(cand.channels)
    if not found and cand.neighbours and Channel.NEIGHBOUR in set(on):
        found.add(Channel.NEIGHBOUR)
    return tuple(channel for channel in CHANNEL_ORDER if channel in found)
