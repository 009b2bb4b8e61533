"""Instruction-like items rank below unflagged evidence of comparable relevance. Pure.

A flagged item (a fact or turn whose text addresses the reading agent, libs/core/hygiene) keeps
its place relative to the other flagged items, and is moved down past every unflagged item whose
cosine is at least its own minus `FLAGGED_MARGIN`. Unflagged items never move relative to each
other, so a ranking without flagged items comes out exactly as fusion made it. A flagged item far
more relevant than the rest (an injection that is also the only answer) stays above them, still
labelled. Only the order changes: `score` stays the cosine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

# On the cosine's scale: all-MiniLM-L6-v2 puts a relevant fact 0.3-0.7 from a query, and two
# paraphrases of one answer within ~0.1 of each other.
FLAGGED_MARGIN = 0.1

T = TypeVar("T")


def demote_flagged(
    ranked: Sequence[T], flagged: Collection[str], key: Callable[[T], tuple[str, float]],
    margin: float = FLAGGED_MARGIN,
) -> list[T]:
    """`ranked` (best first) with each flagged item moved below comparable unflagged ones.

    `key` gives an item's id and cosine (NaN counts as 0). Items whose id is not in `flagged` keep
    their relative order; so do the flagged ones among themselves.
    """
    if not flagged or not any(key(item)[0] in flagged for item in ranked):
        return list(ranked)
    plain = [(index, item) for index, item in enumerate(ranked) if key(item)[0] not in flagged]
    cosines = [_cos(key(item)[1]) for _, item in plain]
    # after[i]: the flagged items that go right after the i-th unflagged one (-1: before all of them).
    after: dict[int, list[T]] = {}
    floor = -1
    for index, item in enumerate(ranked):
        if key(item)[0] not in flagged:
            continue
        bar = _cos(key(item)[1]) - margin
        last = -1
        for position, (original, _) in enumerate(plain):
            if original < index or cosines[position] >= bar:
                last = position
        floor = max(floor, last)  # never ahead of a flagged item that was ranked above it
        after.setdefault(floor, []).append(item)
    out: list[T] = list(after.get(-1, []))
    for position, (_, item) in enumerate(plain):
        out.append(item)
        out.extend(after.get(position, []))
    return out


def _cos(value: float) -> float:
    return 0.0 if value is None or math.isnan(value) else float(value)
