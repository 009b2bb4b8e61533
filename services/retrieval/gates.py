"""Quality gates: what a search leaves out of its ranking before query_memory answers.

Pure, so the lab can replay them on an ungated ranking (lab/gates.py). Three gates, applied in
rank order to the fused ranking (deeper than top_k, so what is left out is back-filled):

- nothing relevant: when no item was found by words (lexical), entities (graph) or adjacency
  (neighbour) and even the best cosine is low, nothing is returned, rather than the store's
  least bad guesses;
- far below the best: an item found by the dense channel alone whose cosine is a small share of
  the best item's is filler, not evidence, unless it is the turn next to one that clears that
  floor (the answer to a question often shares nothing with it but its place in the session);
- near-duplicates: an item whose words repeat a better-ranked item's adds tokens, not facts.

Each left-out item is counted, and query_memory says so in its note: nothing vanishes silently.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echo_memory.libs.core.config.retrieval import QualityGates
from echo_memory.libs.core.contracts.query import Channel, ItemKind


@dataclass(frozen=True, slots=True)
class Ranked:
    """A ranked result: its stored row (text, provenance), its kind, what found it and its cosine."""

    row: Mapping[str, Any]
    kind: ItemKind
    matched: tuple[Channel, ...]  # in fusion.CHANNEL_ORDER; about or digest for those answers
    score: float | None  # cosine to the query (NaN or None: not compared)

    @property
    def id(self) -> str:
        return str(self.row["id"])


_WORD = re.compile(r"\w+")
# Channels whose match is evidence on its own, whatever the cosine.
_NON_DENSE = frozenset({Channel.LEXICAL, Channel.GRAPH, Channel.NEIGHBOUR})


@dataclass
class GateOutcome:
    """What the gates left out (counts) and the best cosine they judged by."""

    nothing_relevant: bool = False
    far_below: int = 0
    near_duplicates: int = 0
    best_cosine: float = 0.0

    def note(self) -> str | None:
        """The sentence query_memory adds to its note; None when nothing was left out."""
        if self.nothing_relevant:
            return (f"nothing relevant: no item matches a word or entity of the query and the closest "
                    f"is far from it (cosine {self.best_cosine:.2f})")
        parts = []
        if self.far_below:
            parts.append(f"{self.far_below} far below the best match")
        if self.near_duplicates:
            parts.append(f"{self.near_duplicates} repeating a better-ranked result")
        return "left out " + " and ".join(parts) if parts else None


def apply_gates(
    ranked: Sequence[Ranked], gates: QualityGates, top_k: int, neighbour_cosine: Mapping[str, float] | None = None
) -> tuple[list[Ranked], GateOutcome]:
    """The first `top_k` items of `ranked` that pass the gates, and what was left out on the way.

    `neighbour_cosine` maps an item's id to the best cosine among the turns next to it in its
    session (absent: no such turn among the candidates). Items below the top_k-th kept one are not
    judged (and not counted). An empty `ranked` gives an empty list and an outcome with nothing
    left out.
    """
    beside = neighbour_cosine or {}
    outcome = GateOutcome()
    cosines = [_cosine(item.score) for item in ranked]
    outcome.best_cosine = max(cosines, default=0.0)
    if not ranked:
        return [], outcome
    if gates.nothing_below > 0 and outcome.best_cosine < gates.nothing_below and not any(
        _NON_DENSE & set(item.matched) for item in ranked
    ):
        outcome.nothing_relevant = True
        return [], outcome
    kept: list[Ranked] = []
    kept_words: list[set[str]] = []
    floor = gates.far_below * outcome.best_cosine
    for item, cosine in zip(ranked, cosines, strict=True):
        if len(kept) == top_k:
            break
        if (gates.far_below > 0 and cosine < floor and not _NON_DENSE & set(item.matched)
                and not _next_to_a_match(beside.get(str(item.row.get("id"))), floor)):
            outcome.far_below += 1
            continue
        words = set(_WORD.findall(str(item.row.get("text") or "").lower()))
        if gates.near_duplicate > 0 and any(_jaccard(words, other) >= gates.near_duplicate for other in kept_words):
            outcome.near_duplicates += 1
            continue
        kept.append(item)
        kept_words.append(words)
    return kept, outcome


def _next_to_a_match(neighbour_cosine: float | None, floor: float) -> bool:
    return neighbour_cosine is not None and not math.isnan(neighbour_cosine) and neighbour_cosine >= floor


def _cosine(value: float | None) -> float:
    if value is None or math.isnan(float(value)):
        return 0.0
    return float(value)


def _jaccard(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)
