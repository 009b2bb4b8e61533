"""How well entity resolution separates variants from look-alikes: the shipped labelled set and its metrics.

The labelled set (entity_pairs.tsv, package data) holds name pairs across software, people,
places and products, each marked `same` (one entity named two ways) or `distinct` (look-alikes).
A fixed quarter of it, chosen by a hash of the pair before any rule was tuned, is held out: rules
and thresholds were tuned on the `dev` part only, and both parts are reported.

Used by `echo-memory calibrate` (the set is its fallback when a store holds few decisions of its
own) and by the entity-pair test and lab command.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal

import numpy as np

from echo_memory.services.writes import name_match

Part = Literal["dev", "holdout"]


@dataclass(frozen=True)
class Pair:
    domain: str
    kind: str
    same: bool
    type: str
    a: str
    b: str

    @property
    def part(self) -> Part:
        return split_of(self.a, self.b)


def split_of(a: str, b: str) -> Part:
    """holdout for a fixed quarter of pairs (by a hash of both names, order-free), dev otherwise."""
    text = "\x1f".join(sorted((a, b)))
    return "holdout" if hashlib.sha256(text.encode()).digest()[0] % 4 == 0 else "dev"


def load_pairs() -> list[Pair]:
    """The shipped labelled set, in file order. Raises ValueError naming the line of a malformed row."""
    text = resources.files("echo_memory.services.writes").joinpath("entity_pairs.tsv").read_text(encoding="utf-8")
    pairs: list[Pair] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) != 6 or cells[2] not in ("same", "distinct"):
            raise ValueError(f"entity_pairs.tsv line {number}: expected 6 tab-separated cells with same|distinct")
        domain, kind, label, type_, a, b = cells
        pairs.append(Pair(domain, kind, label == "same", type_, a, b))
    return pairs


@dataclass(frozen=True)
class Scored:
    same: bool
    score: float
    rule: str


@dataclass(frozen=True)
class Report:
    """Figures for one set of scored pairs at given thresholds."""

    pairs: int
    variants: int
    lookalikes: int
    auc: float
    auc_ci: tuple[float, float]
    variants_caught: float  # share of variants merged or deferred with the right candidate
    lookalikes_caught: float  # share of look-alikes merged or deferred (the bar: <= 2%)
    lookalikes_merged: int
    deferral_precision: float  # of the pairs merged or deferred, the share that are variants
    deferral_recall: float

    def as_dict(self) -> dict[str, object]:
        return {
            "pairs": self.pairs, "variants": self.variants, "lookalikes": self.lookalikes,
            "auc": round(self.auc, 4), "auc_ci95": [round(self.auc_ci[0], 4), round(self.auc_ci[1], 4)],
            "variants_caught": round(self.variants_caught, 4), "lookalikes_caught": round(self.lookalikes_caught, 4),
            "lookalikes_merged": self.lookalikes_merged, "deferral_precision": round(self.deferral_precision, 4),
            "deferral_recall": round(self.deferral_recall, 4),
        }


def auc(labels: Sequence[bool], scores: Sequence[float]) -> float:
    """Area under the ROC curve (Mann-Whitney, ties count half); 0.5 when one class is missing."""
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=float)
    pos, neg = s[y], s[~y]
    if len(pos) == 0 or len(neg) == 0:
        return 0.5
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def bootstrap_auc(labels: Sequence[bool], scores: Sequence[float], rounds: int = 1000, seed: int = 7) -> tuple[float, float]:
    """95% percentile interval of the AUC over `rounds` resamples of the pairs (fixed seed: reproducible)."""
    rng = np.random.default_rng(seed)
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=float)
    if len(y) == 0:
        return (0.5, 0.5)
    values = []
    for _ in range(rounds):
        pick = rng.integers(0, len(y), len(y))
        values.append(auc(y[pick].tolist(), s[pick].tolist()))
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def score_pairs(pairs: Sequence[Pair], cosines: Sequence[float]) -> list[Scored]:
    """Each pair judged by the resolver's rules with its names' cosine."""
    out = []
    for pair, cosine in zip(pairs, cosines, strict=True):
        j = name_match.judge(pair.a, pair.b, float(cosine), kind=name_match.kind_of(pair.type))
        out.append(Scored(pair.same, j.score, j.rule))
    return out


def report(scored: Sequence[Scored], *, defer_at: float, merge_at: float, rounds: int = 1000) -> Report:
    """Figures at the thresholds: a pair at or above `defer_at` is deferred (or merged at `merge_at`)."""
    labels = [s.same for s in scored]
    scores = [s.score for s in scored]
    caught = [s.score >= defer_at for s in scored]
    variants = sum(labels)
    lookalikes = len(labels) - variants
    tp = sum(1 for c, y in zip(caught, labels, strict=True) if c and y)
    fp = sum(1 for c, y in zip(caught, labels, strict=True) if c and not y)
    merged_wrong = sum(1 for s in scored if s.score >= merge_at and not s.same)
    return Report(
        pairs=len(scored), variants=variants, lookalikes=lookalikes,
        auc=auc(labels, scores), auc_ci=bootstrap_auc(labels, scores, rounds=rounds),
        variants_caught=tp / variants if variants else 0.0,
        lookalikes_caught=fp / lookalikes if lookalikes else 0.0,
        lookalikes_merged=merged_wrong,
        deferral_precision=tp / (tp + fp) if tp + fp else 1.0,
        deferral_recall=tp / variants if variants else 0.0,
    )


def cosine_of(left: np.ndarray, right: np.ndarray) -> list[float]:
    """Row-wise cosine of two stacks of L2-normalised vectors."""
    return [float(x) for x in (left * right).sum(axis=1)]
