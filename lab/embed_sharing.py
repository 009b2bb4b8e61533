"""What sharing model runs would save: N callers at once, each its own run against runs shared when busy.

    python -m lab.embed_sharing [--callers 1,4,16] [--rounds 40] [--lanes N]

In one process, with the real model: for each caller count C, C coroutines each ask for one
query's vector at the same moment, `rounds` times, three ways: each in its own worker thread
(`asyncio.to_thread(model.embed, [q])`, what the services do), and through `Coalescer` below (at
most `lanes` runs at once; callers that arrive while they are busy share a run), where a free
lane takes every waiting text ("take_all") or its share of them ("share"). The ways alternate
round by round, so the machine's noise falls on all alike. Prints, per
way and caller count, CPU ms per query (this process's user + system time over the queries), wall
ms per round and how many model runs a round took. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from echo_memory.libs.server.embed import MiniLM

QUERIES = [
    "which database holds the invoices", "who moved CI to GitHub Actions", "how is the Stripe key rotated",
    "auth proxy port", "why did Tuesday's deploy fail", "retry policy for webhooks", "where feature flags live",
    "owner of the payments ledger and the warehouse move in March", "postgres", "the redis session TTL",
    "What did Caroline research about adoption agencies?", "When did Melanie paint a sunrise?",
    "what port does the auth proxy listen on", "which team owns billing", "how long are logs kept",
    "what is the staging database called",
]

Ask = Callable[[str], Awaitable[np.ndarray]]

# One run takes at most this many texts from the queue (a single larger request runs alone).
MAX_TEXTS_PER_RUN = 64


@dataclass
class _Request:
    texts: list[str]
    vectors: asyncio.Future[np.ndarray]


class Coalescer:
    """Runs `embed` in at most `lanes` worker threads at once; waiting requests share a run.

    A free lane takes its share of the waiting texts (all of them over `lanes`, at most
    MAX_TEXTS_PER_RUN), so the other lanes, freed a moment later, have work too.

    Bound to the event loop it was made in. `embed` must be thread-safe and give one row per
    text, in order (`MiniLM.embed`).
    """

    def __init__(self, embed: Callable[[list[str]], np.ndarray], lanes: int, *, share: bool) -> None:
        if lanes < 1:
            raise ValueError("lanes must be at least 1")
        self._embed = embed
        self._lanes = lanes
        self._share = share
        self._running = 0
        self._waiting: deque[_Request] = deque()
        self._runs: set[asyncio.Task[None]] = set()

    async def vectors(self, texts: list[str]) -> np.ndarray:
        """Rows for `texts` in their order, as `embed(texts)` gives them.

        Raises what the run raised (every request of a failed run gets the same error). A caller
        cancelled while waiting leaves the queue; one cancelled during its run only stops waiting.
        """
        request = _Request(list(texts), asyncio.get_running_loop().create_future())
        self._waiting.append(request)
        self._start_runs()
        return await request.vectors

    def _start_runs(self) -> None:
        while self._running < self._lanes:
            batch = self._take()
            if not batch:
                return
            self._running += 1
            # A fresh context: the run is no one request's, so no request's profiler times it.
            run = asyncio.get_running_loop().create_task(self._run(batch), context=contextvars.Context())
            self._runs.add(run)
            run.add_done_callback(self._runs.discard)

    def _take(self) -> list[_Request]:
        cap = MAX_TEXTS_PER_RUN
        if self._share:
            # A share of what waits, not all of it: lanes free up one at a time, and a run that took
            # everything would leave the next free core idle while it works alone.
            pending = sum(len(r.texts) for r in self._waiting if not r.vectors.done())
            cap = min(cap, -(-pending // self._lanes))
        batch: list[_Request] = []
        count = 0
        while self._waiting:
            head = self._waiting[0]
            if head.vectors.done():  # its caller was cancelled while it waited
                self._waiting.popleft()
                continue
            if batch and count + len(head.texts) > cap:
                break
            batch.append(self._waiting.popleft())
            count += len(head.texts)
        return batch

    async def _run(self, batch: list[_Request]) -> None:
        try:
            texts = [text for request in batch for text in request.texts]
            try:
                rows = await asyncio.to_thread(self._embed, texts)
            except asyncio.CancelledError:
                for request in batch:
                    request.vectors.cancel()
                raise
            except Exception as exc:  # handed to every caller of this run, none swallowed
                for request in batch:
                    if not request.vectors.done():
                        request.vectors.set_exception(exc)
                return
            start = 0
            for request in batch:
                end = start + len(request.texts)
                if not request.vectors.done():
                    request.vectors.set_result(rows[start:end])
                start = end
        finally:
            self._running -= 1
            self._start_runs()


class _Counted:
    """The model's `embed`, counting its runs (each call is one run of a shared batch or one request)."""

    def __init__(self, model: MiniLM) -> None:
        self.runs = 0
        self.real = model.embed

    def __call__(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        self.runs += 1
        return self.real(texts, batch_size)


async def _round(ask: Ask, callers: int, offset: int) -> None:
    await asyncio.gather(*(ask(QUERIES[(offset + i) % len(QUERIES)]) for i in range(callers)))


async def measure(callers: list[int], rounds: int, lanes: int) -> dict[str, Any]:
    model = MiniLM()
    counted = _Counted(model)
    model.embed = counted  # type: ignore[method-assign]
    take_all = Coalescer(lambda texts: model.embed(texts), lanes, share=False)
    share = Coalescer(lambda texts: model.embed(texts), lanes, share=True)
    ways: dict[str, Ask] = {
        "own_thread": lambda q: asyncio.to_thread(model.embed, [q]),
        "take_all": lambda q: take_all.vectors([q]),
        "share": lambda q: share.vectors([q]),
    }
    for ask in ways.values():  # warm every way (first runs allocate ONNX Runtime's buffers)
        for _ in range(5):
            await _round(ask, max(callers), 0)
    report: dict[str, Any] = {"lanes": lanes, "rounds": rounds, "levels": []}
    for count in callers:
        totals = {name: {"cpu": 0.0, "wall": 0.0, "runs": 0} for name in ways}
        for r in range(rounds):
            for name, ask in ways.items():
                counted.runs = 0
                cpu, wall = time.process_time(), time.perf_counter()
                await _round(ask, count, r)
                totals[name]["cpu"] += time.process_time() - cpu
                totals[name]["wall"] += time.perf_counter() - wall
                totals[name]["runs"] += counted.runs
        queries = count * rounds
        report["levels"].append({
            "callers": count,
            **{name: {"cpu_ms_per_query": round(t["cpu"] / queries * 1000, 2),
                      "wall_ms_per_round": round(t["wall"] / rounds * 1000, 2),
                      "runs_per_round": round(t["runs"] / rounds, 2)} for name, t in totals.items()},
        })
    return report


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.embed_sharing", description=__doc__.splitlines()[0])
    parser.add_argument("--callers", default="1,4,16", help="caller counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=40, help="rounds per way and caller count")
    parser.add_argument("--lanes", type=int, default=os.cpu_count() or 1, help="runs at once (default: the cores)")
    args = parser.parse_args()
    callers = [int(part) for part in args.callers.split(",")]
    print(json.dumps(asyncio.run(measure(callers, args.rounds, args.lanes)), indent=2))


if __name__ == "__main__":
    main()
