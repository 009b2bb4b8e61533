"""How the model commands (distil, hints, abstracts) account for a write the service refused."""

from __future__ import annotations

from typing import Any

import pytest

from echo_memory.libs.core.contracts.errors import InvalidArgument, Unavailable
from echo_memory.libs.local.llm.jobs import Report


def test_a_refusal_for_good_is_counted_and_told_on_the_item() -> None:
    report = Report(command="distil", write=True)
    item: dict[str, Any] = {"episode_id": "e1"}
    report.refused(InvalidArgument("fact holds a secret"), item, "write refused", "left pending: write refused")
    report.refused(InvalidArgument("another"), {}, "write refused", "left pending: write refused")
    assert report.skipped == {"write refused (invalid_argument)": 2}
    assert item["outcome"] == "left pending: write refused: fact holds a secret"
    assert "2 write refused (invalid_argument)" in report.summary()


def test_a_retryable_error_ends_the_run_uncounted() -> None:
    report = Report(command="abstracts", write=True)
    item: dict[str, Any] = {}
    with pytest.raises(Unavailable):
        report.refused(Unavailable("database restarting"), item, "write refused", "not stored")
    assert not report.skipped and "outcome" not in item
