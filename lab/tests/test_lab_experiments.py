"""The sweep, ablation and mixed experiments over the real bus, on a small slice of agent-facts.

The slice (its first 30 facts, and the queries whose relevant facts are all among them) keeps the
test fast; the full runs are in lab/NOTES.md. What is checked is behaviour: the store really
grows to each size, every channel set is run and reported against all channels with a paired
interval, and retrieval is back on every channel afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_memory.libs.local.eval.system import channel_settings, restart_service
from echo_memory.libs.testing import EchoStack
from lab.experiments import ALL_CHANNELS, run_ablation, run_mixed, run_sweep

pytestmark = pytest.mark.datasets


@pytest.fixture
def slice_path(tmp_path: Path, datasets: Path) -> Path:
    data = json.loads((datasets / "agent-facts" / "agent-facts.json").read_text())
    facts = data["facts"][:30]
    kept = {f["id"] for f in facts}
    queries = [q for q in data["queries"] if set(q["relevant"]) <= kept]
    assert len(queries) >= 5
    path = tmp_path / "agent-facts-slice.json"
    path.write_text(json.dumps({"facts": facts, "queries": queries}))
    return path


def _call(stack: EchoStack):  # type: ignore[no-untyped-def]
    async def call(service: str, verb: str, args: dict) -> dict:
        return await stack.admin_call(service, verb, args, timeout=120)

    return call


async def test_sweep_pads_the_store_to_each_size(stack: EchoStack, slice_path: Path) -> None:
    report = await run_sweep(_call(stack), slice_path, [80, 130])
    points = report["points"]
    assert [p["facts"] for p in points] == [30, 80, 130]
    assert [p["distractors"] for p in points] == [0, 50, 100]
    for point in points:
        assert 0.0 <= point["mrr"] <= 1.0 and point["mrr_ci95"][0] <= point["mrr"] <= point["mrr_ci95"][1]
    assert "mrr_vs_unpadded" not in points[0]
    assert all("delta" in p["mrr_vs_unpadded"] for p in points[1:])
    # Distractors can only push the relevant facts down (or leave them): never a better MRR.
    assert points[-1]["mrr"] <= points[0]["mrr"] + 1e-9


async def test_ablation_switches_each_channel_off_and_restores_them(stack: EchoStack, slice_path: Path) -> None:
    seen: list[tuple[str | None, str | None]] = []

    async def restart(channels: str | None) -> None:
        await restart_service(stack, "retrieval", retrieval=channel_settings(channels))
        # What the restarted service says about its lexical channel proves the setting took.
        probe = await stack.admin_call("retrieval", "query_memory", {"query": "which database do we use?"})
        seen.append((channels, probe["lexical"]))

    report = await run_ablation(_call(stack), restart, slice_path)
    configs = report["configs"]
    assert [c["config"] for c in configs] == ["all channels"] + [f"without {c}" for c in ALL_CHANNELS]
    assert [lexical for _, lexical in seen] == ["bm25", "bm25", None, "bm25", "bm25", "bm25"]
    assert seen[-1][0] is None and stack.settings.retrieval.channels == ALL_CHANNELS  # back to the defaults
    assert "mrr_vs_all" not in configs[0]["agent_facts"]
    without_dense = next(c for c in configs if c["config"] == "without dense")
    assert without_dense["channels"] == ["lexical", "graph", "neighbour"]
    # The queries are mostly paraphrases: dropping the dense channel must cost MRR, visibly.
    assert without_dense["agent_facts"]["mrr_vs_all"]["delta"] < 0


async def test_mixed_scores_each_set_alone_and_together(stack: EchoStack, slice_path: Path, datasets: Path) -> None:
    report = await run_mixed(_call(stack), slice_path, datasets / "locomo" / "locomo10.json", 1)
    queries = len(json.loads(slice_path.read_text())["queries"])
    facts, turns = report["agent_facts"], report["locomo"]
    assert facts["alone"]["n"] == facts["with_turns"]["n"] == queries
    assert turns["questions"] == 197  # conv-26's questions with evidence
    # Each corpus keeps its own order beside the other, so the other corpus can only push an
    # answer down: never a better score together than alone. (LoCoMo gets one question of slack:
    # exact ties between identical turns fall to their ids, drawn afresh by each import.)
    assert facts["with_turns"]["mrr"] <= facts["alone"]["mrr"] + 1e-9
    assert facts["mrr_change"]["delta"] <= 0
    assert turns["with_facts"]["recall"] <= turns["alone"]["recall"] + 1 / 197
    assert turns["mrr_change"]["delta"] <= 1 / 197
    # …and only by the items of the other corpus that reach the top 10.
    if facts["turns_in_top10"] == 0:
        assert facts["with_turns"]["hit10"] == facts["alone"]["hit10"]
    assert 0 <= turns["facts_in_top10"] <= 10
