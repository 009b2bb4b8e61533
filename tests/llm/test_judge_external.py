"""`echo-memory judge-external`: the user's model (a local server speaking the OpenAI chat API stands in
for it; the real provider is not reachable here) grades a finished eval-external run's answers.
Dry run by default: nothing is sent. No store is read or written: the report file is the only input."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from echo_memory.libs.local.cli.main import main
from echo_memory.libs.local.eval import longmemeval
from echo_memory.libs.local.eval.runner import run_longmemeval
from echo_memory.libs.local.llm.judge import ANSWER_SYSTEM, GRADE_SYSTEM
from echo_memory.libs.testing import EchoStack
from tests.llm.openai_stand_in import Answer, Received, llm_env, serve

FIXTURE = Path(__file__).resolve().parents[1] / "bench" / "fixtures" / "longmemeval_tiny.json"


def model(request: Received) -> Answer:
    """An honest stand-in: answers with the first recalled line; grades by whether the reference is in the answer."""
    system = request.body["messages"][0]["content"]
    user = request.user_text()
    if system == ANSWER_SYSTEM:
        memory = user.split("Recalled memory:\n", 1)[1].split("\n\nQuestion:", 1)[0]
        return Answer(content=json.dumps({"answer": memory.splitlines()[0].partition(". ")[2]}))
    assert system == GRADE_SYSTEM
    reference = user.split("Reference answer: ", 1)[1].split("\n", 1)[0]
    given = user.split("Answer to grade: ", 1)[1]
    return Answer(content=json.dumps({"correct": reference.lower() in given.lower()}))


async def test_judge_external_dry_run_then_graded_by_the_users_model(
    stack: EchoStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def call(service: str, verb: str, args: dict[str, object]) -> dict[str, object]:
        return await stack.admin_call(service, verb, args)

    report = await run_longmemeval(call, longmemeval.load(FIXTURE))  # a finished run, as --json prints it
    path = tmp_path / "run.json"
    path.write_text(json.dumps(report))
    rows = report["per_question"]
    assert all(r["question"] and r["answer"] and r["retrieved"] for r in rows)
    expected = [float(r["answer"].lower() in r["retrieved"][0].lower()) for r in rows]

    with serve(model) as stand_in:
        for name, value in llm_env(stand_in).items():
            monkeypatch.setenv(name, value)
        code = await asyncio.to_thread(main, ["judge-external", str(path)])
        out = capsys.readouterr().out
        assert code == 0
        assert f"{len(rows)} questions of longmemeval -> {2 * len(rows)} calls to stand-in-model" in out
        assert "nothing sent" in out and rows[0]["question"] in out
        assert stand_in.requests == []  # a dry run sends nothing

        code = await asyncio.to_thread(main, ["judge-external", str(path), "--send", "--json"])
        result = json.loads(capsys.readouterr().out)
        assert code == 0 and len(stand_in.requests) == 2 * len(rows)
        assert [q["correct"] for q in result["per_question"]] == expected
        assert result["overall"]["accuracy"] == round(sum(expected) / len(expected), 4)
        low, high = result["overall"]["accuracy_ci95"]
        assert low <= result["overall"]["accuracy"] <= high
        assert set(result["by_kind"]) == {r["kind"] for r in rows}

        code = await asyncio.to_thread(main, ["judge-external", str(path), "--send", "--limit", "1"])
        assert code == 0 and "graded by stand-in-model (2 calls)" in capsys.readouterr().out

        sent = len(stand_in.requests)
        monkeypatch.delenv("ECHO_MEMORY_LLM_API_KEY")
        code = await asyncio.to_thread(main, ["judge-external", str(path), "--send"])
        assert code == 1 and "ECHO_MEMORY_LLM_API_KEY" in capsys.readouterr().err
        assert len(stand_in.requests) == sent


def test_a_report_without_question_texts_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"dataset": "locomo", "per_question": [{"system": {"hit": 1.0}, "bm25": {}}]}))
    assert main(["judge-external", str(old)]) == 2
    assert "no question, answer, kind and retrieved texts" in capsys.readouterr().err
    assert main(["judge-external", str(tmp_path / "missing.json")]) == 2
