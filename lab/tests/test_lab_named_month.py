"""The named-month experiment's question parsing, date span and re-ranking, on values written here."""

from __future__ import annotations

from datetime import datetime

import pytest

from echo_memory.services.retrieval.channels import Candidate
from lab.__main__ import main
from lab.named_month import Span, named_span, with_bonus


def test_a_month_and_an_optional_year_are_read_from_the_question() -> None:
    assert named_span("When did Melanie go camping in July?") == Span(7)
    assert named_span("What items did Calvin buy in March 2023?") == Span(3, 2023)
    assert named_span("What did Caroline research?") is None
    assert named_span("Did they mayhem?") is None  # a month only as a whole word


def test_the_span_is_the_month_and_the_next_and_a_december_runs_into_january() -> None:
    july = Span(7)
    assert july.holds(datetime(2023, 7, 30)) and july.holds(datetime(2022, 8, 2))
    assert not july.holds(datetime(2023, 6, 30)) and not july.holds(datetime(2023, 9, 1))
    december = Span(12, 2022)
    assert december.holds(datetime(2022, 12, 5)) and december.holds(datetime(2023, 1, 10))
    assert not december.holds(datetime(2023, 12, 5))


def test_the_bonus_lifts_only_turns_said_inside_the_span() -> None:
    a, b, c = (Candidate(id=x, kind="episode", cos=0.5) for x in "abc")
    ranked = [(a, 0.9), (b, 0.8), (c, 0.7)]
    when = {"a": datetime(2023, 5, 1), "c": datetime(2023, 7, 9)}  # b has no date
    assert [x.id for x, _ in with_bonus(ranked, when, Span(7), 0.25)] == ["c", "a", "b"]
    assert with_bonus(ranked, when, None, 0.25) == ranked
    assert with_bonus(ranked, when, Span(7), 0.0) == ranked


def test_a_negative_bonus_is_refused_before_anything_starts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["named-month", "--bonuses", "0,-1"]) == 2
    assert "--bonuses" in capsys.readouterr().err
