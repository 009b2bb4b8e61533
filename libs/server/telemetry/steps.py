"""Per-request step timings for profiling, off unless a profiler switches them on.

A profiler (lab/write_profile.py) calls `collect()` to get a list that each request's step
durations are appended to; until then `step()` returns one shared no-op context manager and a
request pays one context-variable read per step. The timings are wall-clock milliseconds; steps
that run at the same time (the embedding thread beside SQL) overlap, so they do not add up to the
request's total.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from types import TracebackType

# The current request's step durations in ms; None when nobody is collecting.
_CURRENT: ContextVar[dict[str, float] | None] = ContextVar("echo_request_steps", default=None)
_OFF: AbstractContextManager[None] = nullcontext()
_sink: list[tuple[str, dict[str, float]]] | None = None


class _Timer:
    __slots__ = ("_into", "_name", "_start")

    def __init__(self, into: dict[str, float], name: str) -> None:
        self._into, self._name, self._start = into, name, 0.0

    def __enter__(self) -> None:
        self._start = time.perf_counter()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        elapsed = (time.perf_counter() - self._start) * 1000
        self._into[self._name] = self._into.get(self._name, 0.0) + elapsed


def step(name: str) -> AbstractContextManager[None]:
    """Time the block as `name` in the current request (durations of one name add up); a no-op when off."""
    into = _CURRENT.get()
    return _OFF if into is None else _Timer(into, name)


def started() -> float | None:
    """The clock now when timing is on (for a step whose end lies in another block), else None."""
    return time.perf_counter() if _CURRENT.get() is not None else None


def since(name: str, start: float | None) -> None:
    """Add the time from `start` (a `started()` value) to now as `name`; nothing when `start` is None."""
    into = _CURRENT.get()
    if start is not None and into is not None:
        into[name] = into.get(name, 0.0) + (time.perf_counter() - start) * 1000


@contextmanager
def request(verb: str) -> Iterator[None]:
    """One request's scope for `step`: its durations go to the sink under the verb's name at the end.

    A no-op when no profiler collects. Tasks and threads started inside inherit the request's dict.
    """
    if _sink is None:
        yield
        return
    timings: dict[str, float] = {}
    token = _CURRENT.set(timings)
    started_at = time.perf_counter()
    try:
        yield
    finally:
        _CURRENT.reset(token)
        timings["request"] = (time.perf_counter() - started_at) * 1000
        _sink.append((verb, timings))


def collect() -> list[tuple[str, dict[str, float]]]:
    """Switch timing on for this process; returns the list every later request's timings go to.

    Each entry is (verb, step name -> ms), with "request" for the whole request in the service,
    from argument validation to commit.
    """
    global _sink
    _sink = []
    return _sink


def stop() -> None:
    """Switch timing off again; requests already running finish into the old list."""
    global _sink
    _sink = None
