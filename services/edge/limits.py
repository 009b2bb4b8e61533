"""Per-token rate limiting (token bucket) and the query result-size ceiling.

The limiter lives in the edge process, so with N edge replicas a token may make up to N times
the configured rate; the limit protects the services from one runaway agent, it is not billing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from echo_memory.libs.core.contracts.errors import RateLimited

_MAX_KEYS = 10_000  # forget idle buckets beyond this many tokens, so memory stays bounded


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """A token bucket per key: `burst` calls at once, refilled at `per_minute` calls a minute.

    `per_minute == 0` disables the limit.
    """

    def __init__(self, per_minute: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = per_minute / 60.0
        self._burst = float(burst)
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def check(self, key: str) -> None:
        """Take one call from `key`'s bucket.

        Raises:
            RateLimited: the bucket is empty; `retry_after` says when one call is available again.
        """
        if self._rate <= 0:
            return
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= _MAX_KEYS:
                self._evict(now)
            bucket = self._buckets[key] = _Bucket(tokens=self._burst, updated=now)
        bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return
        wait = (1.0 - bucket.tokens) / self._rate
        raise RateLimited(
            f"too many calls for this token: at most {self._rate * 60:g} a minute with bursts of "
            f"{self._burst:g}; retry in {wait:.1f} s",
            retry_after=round(wait, 3),
        )

    def available(self, key: str) -> bool:
        """True when `key` could make one call now (nothing is taken)."""
        if self._rate <= 0:
            return True
        bucket = self._buckets.get(key)
        if bucket is None:
            return True
        return min(self._burst, bucket.tokens + (self._clock() - bucket.updated) * self._rate) >= 1.0

    def retry_after(self, key: str) -> float:
        """Seconds until `key` has one call again (0 when it has one now)."""
        bucket = self._buckets.get(key)
        if self._rate <= 0 or bucket is None:
            return 0.0
        have = min(self._burst, bucket.tokens + (self._clock() - bucket.updated) * self._rate)
        return max(0.0, (1.0 - have) / self._rate)

    def _evict(self, now: float) -> None:
        # Full buckets carry no information: dropping them changes nobody's limit.
        full = [k for k, b in self._buckets.items() if b.tokens + (now - b.updated) * self._rate >= self._burst]
        for key in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[key]


def cap_max_tokens(arguments: dict[str, Any], default: int, ceiling: int) -> dict[str, Any]:
    """query_memory arguments with `max_tokens` set to the default when absent and lowered to the ceiling.

    Anything that is not a positive integer is left alone for the contract model to refuse.
    """
    value = arguments.get("max_tokens")
    if value is None:
        return {**arguments, "max_tokens": min(default, ceiling)}
    if isinstance(value, int) and not isinstance(value, bool) and value > ceiling:
        return {**arguments, "max_tokens": ceiling}
    return arguments


__all__ = ["RateLimiter", "cap_max_tokens"]
