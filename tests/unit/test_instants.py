"""The span each accepted form of a caller's time names, and the forms that are errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.core.contracts.instants import parse_span

T = 1_764_000_000  # 2025-11-24T16:00:00Z
AT = datetime.fromtimestamp(T, tz=UTC)
SECOND, MINUTE, DAY, MICRO = timedelta(seconds=1), timedelta(minutes=1), timedelta(days=1), timedelta(microseconds=1)


@pytest.mark.parametrize(
    "value, start, length",
    [
        (T, AT, SECOND),
        (str(T), AT, SECOND),
        (T + 0.25, AT + timedelta(milliseconds=250), MICRO),
        (f"{T}.25", AT + timedelta(milliseconds=250), MICRO),
        ("2025-11-24T16:00:00Z", AT, SECOND),
        ("2025-11-24T16:00:00", AT, SECOND),  # no offset: UTC
        ("2025-11-24T18:00:00+02:00", AT, SECOND),
        ("2025-11-24T16:00:00.5Z", AT + timedelta(milliseconds=500), MICRO),
        ("2025-11-24T16:00Z", AT, MINUTE),
        ("2025-11-24", AT.replace(hour=0), DAY),
    ],
)
def test_each_form_names_the_span_of_its_precision(value: object, start: datetime, length: timedelta) -> None:
    span = parse_span(value, "as_of")  # type: ignore[arg-type]
    assert (span.start, span.end) == (start, start + length)
    assert span.last == start + length - MICRO


@pytest.mark.parametrize("value", ["yesterday", "", "-1", -1, "2026-02-30", "2025-11-24T25:00Z", "0999-01-01", 1e20,
                                   float("nan"), float("inf"), "9000-01-01", "2025-W48"])
def test_anything_else_is_invalid_argument_naming_the_field(value: object) -> None:
    with pytest.raises(InvalidArgument, match="as_of"):
        parse_span(value, "as_of")  # type: ignore[arg-type]
