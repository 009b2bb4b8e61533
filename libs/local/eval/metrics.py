"""Ranking metrics and bootstrap confidence intervals (pure functions)."""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def recall_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """Share of the gold ids found in the top k (0.0 for an empty gold set is never asked)."""
    return len(gold & set(ranked[:k])) / len(gold)


def hit_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    return 1.0 if gold & set(ranked[:k]) else 0.0


def reciprocal_rank(ranked: Sequence[str], gold: set[str], k: int | None = None) -> float:
    """1/rank of the first gold id within the top k (all when k is None), else 0."""
    for index, ident in enumerate(ranked[:k] if k else ranked, start=1):
        if ident in gold:
            return 1.0 / index
    return 0.0


# Tokens per recall are counted over the top ten, the recall an agent makes, whatever depth a
# harness ranks to, so every set's figure means the same thing.
RECALL_DEPTH = 10


def recall_tokens(tokens: Sequence[int]) -> float:
    """Tokens a recall puts in an agent's context: the sum over the first RECALL_DEPTH items of a
    ranking, given each item's token count in rank order (0.0 for an empty ranking)."""
    return float(sum(tokens[:RECALL_DEPTH]))


def returned_tokens(results: Sequence[Mapping[str, Any]]) -> float:
    """`recall_tokens` of a query_memory answer's `results`, by the `tokens` the server counted."""
    return recall_tokens([int(item["tokens"]) for item in results])


def latency_stats(values: Sequence[float]) -> dict[str, float]:
    """p50 and p95 (nearest rank, ms rounded to 0.01) and the count of `values`."""
    return {"p50": round(percentile(values, 50), 2), "p95": round(percentile(values, 95), 2), "n": len(values)}


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def bootstrap_ci(
    values: Sequence[float], *, samples: int = 1000, seed: int = 7, stat: Callable[[Sequence[float]], float] = statistics.fmean
) -> tuple[float, float]:
    """95% percentile-bootstrap interval of `stat` over `values` (paired diffs work the same way)."""
    rng = random.Random(seed)
    n = len(values)
    draws = sorted(stat([values[rng.randrange(n)] for _ in range(n)]) for _ in range(samples))
    return draws[int(0.025 * samples)], draws[int(0.975 * samples) - 1]


def summarise(rows: Sequence[Mapping[str, Any]], *, ci: bool = True, samples: int = 1000) -> dict[str, Any]:
    """The mean of every float column of `rows` (4 decimals), its 95% bootstrap interval
    (`<key>_ci95`) when `ci`, and `n`."""
    keys = [k for k, v in rows[0].items() if isinstance(v, float)] if rows else []
    out: dict[str, Any] = {}
    for key in keys:
        values = [float(r[key]) for r in rows]
        out[key] = round(statistics.fmean(values), 4)
        if ci:
            low, high = bootstrap_ci(values, samples=samples)
            out[f"{key}_ci95"] = [round(low, 4), round(high, 4)]
    out["n"] = len(rows)
    return out
