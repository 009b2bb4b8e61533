"""The shared-runs experiment hands every caller its own text's vector and shares runs only when busy."""

from __future__ import annotations

import asyncio

import numpy as np

from echo_memory.libs.server.embed import MiniLM
from lab.embed_sharing import QUERIES, Coalescer, measure


async def test_shared_runs_give_each_caller_its_own_vector(embedder: MiniLM) -> None:
    runs: list[int] = []

    def embed(texts: list[str]) -> np.ndarray:
        runs.append(len(texts))
        return embedder.embed(texts)

    sizes: dict[bool, list[int]] = {}
    for share in (False, True):
        runs.clear()
        coalescer = Coalescer(embed, 2, share=share)
        got = await asyncio.gather(*(coalescer.vectors([q]) for q in QUERIES))
        np.testing.assert_allclose(np.concatenate(got), embedder.embed(QUERIES), atol=1e-5)
        assert sum(runs) == len(QUERIES)
        assert len(runs) < len(QUERIES)  # the callers that found both lanes busy shared runs
        sizes[share] = list(runs)
    # The first two callers find a lane each; a freed lane then takes every waiting text, or its share.
    assert sizes[False] == [1, 1, len(QUERIES) - 2]
    assert max(sizes[True]) <= -(-(len(QUERIES) - 2) // 2) and len(sizes[True]) > 3


async def test_the_report_has_every_way_at_every_level() -> None:
    report = await measure([1, 3], rounds=2, lanes=2)
    assert [level["callers"] for level in report["levels"]] == [1, 3]
    for level in report["levels"]:
        assert set(level) == {"callers", "own_thread", "take_all", "share"}
        assert level["own_thread"]["runs_per_round"] == level["callers"]  # one run per caller, by construction
        assert all(way["cpu_ms_per_query"] > 0 for name, way in level.items() if name != "callers")
