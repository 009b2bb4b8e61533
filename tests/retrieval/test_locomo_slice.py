"""A fixed LoCoMo slice through the real import and query path, with a recorded floor.

conv-26, all 197 of its questions with evidence (the first 40 until the reply credit: too few,
see FLOOR). Measured when this test was written: see FLOOR below; it fails when retrieval
quality drops under it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from libs.eval.runner import run_locomo
from libs.testing import EchoStack

# Whole conversation, measured with the reply credit (reply 0.6, question penalty 0.2, neighbour
# 0.15): recall 0.776, hit 0.827, MRR 0.553, session 0.932; without it (neighbour 0.225, the
# code before): 0.750 / 0.797 / 0.514 / 0.927, which the MRR floor rejects. The first 40
# questions alone went the other way (MRR 0.552 → 0.493: several open a session with news and a
# question, and the credit moves that turn below its reply), while every one of the ten
# conversations gained on the whole set (+0.008 to +0.092 MRR); 40 questions were too few to
# guard a ranking change, so the slice is now the whole conversation.
FLOOR = {"recall": 0.74, "hit": 0.79, "mrr": 0.52, "session": 0.90}


@pytest.mark.datasets
async def test_locomo_slice_recall_stays_above_its_floor(stack: EchoStack, datasets: Path) -> None:
    async def call(service: str, verb: str, args: dict) -> dict:
        return await stack.admin_call(service, verb, args, timeout=120)

    report = await run_locomo(call, datasets / "locomo" / "locomo10.json", conversations=1)
    overall = report["overall"]
    assert report["questions"] == 197
    for key, floor in FLOOR.items():
        assert overall[key] >= floor, (key, overall)
