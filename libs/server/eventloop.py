"""How every Echo Memory process runs its event loop: on uvloop where it is installed.

A query crosses the event loop a few dozen times (NATS, psycopg, HTTP, worker threads). Measured
with two stacks in one process, one per loop, alternating question by question: query p50 over
the bus 37.1 -> 35.5 ms at 100k facts and 26.9 -> 26.2 ms at 1k (lab/NOTES.md). uvloop has
no Windows build, so there, or with ECHO_MEMORY_UVLOOP=0, the stock asyncio loop runs instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory(use_uvloop: bool = True) -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's loop constructor; asyncio's own when `use_uvloop` is false or uvloop is missing."""
    if use_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop
    # Asked for by class, not through the current policy, which may itself be uvloop's.
    return asyncio.DefaultEventLoopPolicy().new_event_loop


def run(main: Coroutine[Any, Any, T], *, use_uvloop: bool = True) -> T:
    """`asyncio.run(main)` on the loop `loop_factory` picks; returns what `main` returns."""
    with asyncio.Runner(loop_factory=loop_factory(use_uvloop)) as runner:
        return runner.run(main)


def loop_name() -> str:
    """'uvloop' or 'asyncio': the loop running now (benchmark reports say which they ran on)."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"
