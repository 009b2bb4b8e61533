"""`echo-memory eval-external longmemeval` on a tiny invented file in LongMemEval's format.

The fixture has 8 questions over 5 types; one is an abstention question (`_abs`, no evidence).
Each haystack is six shared filler sessions plus the question's answer sessions, so every answer
session is within the first ten sessions and recall@10 is 1 by construction; what the test pins
is the session mapping, the skipping, the per-type cut and the report's shape.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from echo_memory.libs.local.cli.main import main
from echo_memory.libs.local.eval import longmemeval
from echo_memory.libs.local.eval.runner import longmemeval_scores, run_longmemeval
from echo_memory.libs.server.embed import count_tokens
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.rows import sql

FIXTURE = Path(__file__).parent / "fixtures" / "longmemeval_tiny.json"
TYPES = ["knowledge-update", "multi-session", "single-session-assistant", "single-session-user", "temporal-reasoning"]
SCOPE_TURNS = """
SELECT s.name, count(*) FROM episodes ep JOIN scopes s ON s.id = ep.scope_id
WHERE s.name LIKE 'eval-longmemeval-%' GROUP BY s.name
"""
FIRST_OF_EACH = ["e47c1a01", "b3d90f12", "5a8e2c33", "c61f7d44", "9e2b6a55"]


def test_session_scores_by_hand() -> None:
    # Turns of sessions b, a, b, c, g1, d, g2: sessions rank b, a, c, g1, d, g2.
    scores = longmemeval_scores(["b", "a", "b", "?", "c", "g1", "d", "g2"], {"g1", "g2"})
    assert scores == {"recall@5": 0.5, "recall@10": 1.0, "all@5": 0.0, "all@10": 1.0, "mrr": 0.25}
    assert longmemeval_scores([], {"g1"})["mrr"] == 0.0


def test_the_fixture_loads_with_dates_turns_and_the_first_of_each_type() -> None:
    questions = longmemeval.load(FIXTURE)
    assert len(questions) == 8 and len({q.question_type for q in questions}) == 5
    first = questions[0]
    assert [s.id for s in first.sessions][2] == "answer_e47c1a01_1"
    assert first.sessions[0].occurred_at == 1709283660  # 2024/03/01 (Fri) 09:01 UTC
    assert first.sessions[2].turns[0].has_answer and not first.sessions[2].turns[1].has_answer
    assert [q.question_id for q in longmemeval.first_of_each_type(questions, 1)] == FIRST_OF_EACH
    assert [q.has_evidence for q in questions].count(False) == 1


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda data: {"questions": data}, "expected a list of questions"),
        (lambda data: [{k: v for k, v in data[0].items() if k != "answer_session_ids"}], "has no answer_session_ids"),
        (lambda data: [{**data[0], "haystack_dates": data[0]["haystack_dates"][1:]}], "differ in length"),
        (lambda data: [{**data[0], "answer_session_ids": ["nowhere"]}], "nowhere are not in its haystack"),
        (lambda data: [{**data[0], "haystack_sessions": [[{"speaker": "x"}]] * 7}], "is not {role, content}"),
    ],
)
def test_a_file_not_in_the_format_is_refused_before_connecting(
    tmp_path: Path, mutate: object, fragment: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECHO_MEMORY_HOME", str(tmp_path))  # nothing runs there: a refusal must come first
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(mutate(json.loads(FIXTURE.read_text()))))  # type: ignore[operator]
    assert main(["eval-external", "longmemeval", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err


def test_per_type_below_one_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval-external", "longmemeval", str(FIXTURE), "--per-type", "0"]) == 2
    assert "--per-type must be 1 or more" in capsys.readouterr().err


async def test_every_question_is_asked_in_its_own_haystack(stack: EchoStack) -> None:
    async def call(service: str, verb: str, args: dict) -> dict:
        return await stack.admin_call(service, verb, args, timeout=120)

    report = await run_longmemeval(call, longmemeval.load(FIXTURE))
    assert report["questions"] == 7 and report["skipped_no_evidence"] == 1 and report["truncated_turns"] == 0
    assert sorted(report["by_type"]) == TYPES
    assert report["by_type"]["multi-session"]["n"] == 2
    overall = report["overall"]
    assert overall["n"] == 7 and overall["recall@10"] == 1.0 and overall["all@10"] == 1.0
    assert overall["recall@5_ci95"][0] <= overall["recall@5"] <= overall["recall@5_ci95"][1]
    rows = {row["question_id"]: row for row in report["per_question"]}
    # The answer turns share the question's words (dog, 5k personal best, Tallinn job): first session.
    assert rows["e47c1a01"]["mrr"] == 1.0 and rows["c61f7d44"]["mrr"] == 1.0 and rows["0f4d8b66"]["mrr"] == 1.0
    assert rows["c61f7d44"]["all@5"] == 1.0  # both 5k sessions
    assert "7d3c9e77_abs" not in rows
    # Each question had a scope of its own, holding only its haystack's turns.
    per_scope = await sql(stack.database_url, SCOPE_TURNS)
    haystacks = sorted(sum(len(s.turns) for s in q.sessions) for q in longmemeval.load(FIXTURE) if q.has_evidence)
    assert sorted(n for _, n in per_scope) == haystacks
    # Tokens per recall: the first ten turns returned, never more than the whole haystack holds.
    for question in longmemeval.load(FIXTURE):
        if question.has_evidence:
            whole = sum(count_tokens(f"{t.role}: {t.content}") for s in question.sessions for t in s.turns)
            assert 0 < rows[question.question_id]["tokens@10"] <= whole


async def test_the_command_runs_end_to_end_against_the_running_system(
    stack: EchoStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ECHO_MEMORY_HOME", str(tmp_path))
    monkeypatch.setenv("ECHO_MEMORY_NATS_URL", stack.nats_url)
    monkeypatch.setenv("ECHO_MEMORY_ORG", stack.org)
    # The CLI runs its own event loop; the in-process services keep serving on this one.
    code = await asyncio.to_thread(main, ["eval-external", "longmemeval", str(FIXTURE), "--per-type", "1", "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    report = json.loads(out)
    assert report["dataset"] == "longmemeval" and report["questions"] == 5 and report["skipped_no_evidence"] == 0
    assert [row["question_id"] for row in report["per_question"]] == FIRST_OF_EACH
    assert sorted(report["by_type"]) == TYPES and all(group["n"] == 1 for group in report["by_type"].values())
