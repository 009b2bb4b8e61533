"""eval-external memdaily on a tiny fixture in MemDaily's layout, and the plain BM25 baseline beside it."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from echo_memory.libs.local.eval import memdaily
from echo_memory.libs.local.eval.bm25 import BM25, lead, tokens
from echo_memory.libs.testing import EchoStack

FIXTURE = Path(__file__).parent / "fixtures" / "memdaily_tiny"


def test_cjk_text_becomes_character_bigrams_and_latin_words_stay_whole() -> None:
    assert tokens("数据库大会") == ["数据", "据库", "库大", "大会"]
    assert tokens("Postgres 16的索引") == ["postgres", "16", "的索", "索引"]
    assert tokens("猫") == ["猫"]
    assert tokens("Hello, World!") == ["hello", "world"]


def test_bm25_matches_a_hand_computed_score() -> None:
    index = BM25({"a": "kiln fired vase", "b": "kiln hot hot", "c": "bought vase"})
    # n = 3, avgdl = 8/3; "hot": df 1, tf 2 in b (length 3)
    idf = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    norm = 1.2 * (1 - 0.75 + 0.75 * 3 / (8 / 3))
    assert math.isclose(index.scores("hot")["b"], idf * 2 * 2.2 / (2 + norm))
    assert index.rank("hot kiln") == ["b", "a"]
    assert index.rank("nothing shared") == []


def test_the_lead_is_a_paired_difference_with_an_interval() -> None:
    out = lead([1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0])
    assert out["mean"] == 0.5
    low, high = out["ci95"]  # type: ignore[misc]
    assert 0.0 <= low <= 0.5 <= high <= 1.0


def test_the_loader_drops_error_questions_and_reads_china_time() -> None:
    trajectories = memdaily.load(FIXTURE)
    assert [(t.source, t.tid) for t in trajectories] == [("01_simple_events", 0), ("04_aggregative_roles", 0)]
    first = trajectories[0]
    assert first.kind == "simple" and first.questions == [("数据库技术大会的门票价格是多少？", {"1"})]
    assert first.messages[0].occurred_at == 1714957800  # 2024-05-06 09:10 at UTC+8
    assert trajectories[1].questions[0][1] == {"0", "1"}
    with pytest.raises(FileNotFoundError, match="no MemDaily files"):
        memdaily.dataset_folder(FIXTURE.parent)


async def test_the_harness_scores_the_system_and_bm25_in_one_run(stack: EchoStack) -> None:
    report = await memdaily.run_memdaily(stack.admin_call, FIXTURE)
    assert report["trajectories"] == 2 and report["questions"] == 2
    assert set(report["by_type"]) == {"simple", "aggregative"}
    system, bm25 = report["overall"]["system"], report["overall"]["bm25"]
    assert system["n"] == bm25["n"] == 2
    # The price question shares the conference's name with the right message: BM25 finds it first.
    assert report["by_type"]["simple"]["bm25"]["recall@1"] == 1.0
    # Each trajectory has at most four messages, so top 10 holds every one of them.
    assert system["recall@10"] == 1.0
    assert "mean" in report["overall"]["lead_recall@5"]


async def test_tokens_per_recall_count_chinese_by_the_character(stack: EchoStack) -> None:
    report = await memdaily.run_memdaily(stack.admin_call, FIXTURE)
    price = report["per_question"][0]
    # BM25 finds the two conference messages, 16 Han characters and a full stop each: 2 × round(17 × 1.3).
    assert price["bm25"]["tokens@10"] == 44.0
    # The system returns the answer (22 tokens) and at most every message of the trajectory.
    every = sum(round(len(m.text) * 1.3) for m in memdaily.load(FIXTURE)[0].messages)
    assert 22.0 <= price["system"]["tokens@10"] <= every
    overall = report["overall"]
    assert overall["system"]["tokens@10"] == round(sum(q["system"]["tokens@10"] for q in report["per_question"]) / 2, 4)


def test_the_command_refuses_a_folder_without_memdaily_files(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "echo_memory.libs.local.cli", "eval-external", "memdaily", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "no MemDaily files" in done.stderr
