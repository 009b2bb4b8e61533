"""An instant outside 1970..9000 is "out of range" at both ends, however it is written."""

from __future__ import annotations

import pytest

from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.core.contracts.instants import parse_span


@pytest.mark.parametrize("value", [
    -1, "-1", -0.5, "1969-12-31T23:59:59Z", "0001-01-01",  # before 1970
    "9000-01-01", "9999-12-31T23:59:59+00:00", 253402300800, "999999999999", 10**30, 1e300, "1e300",
    float("inf"), float("-inf"),  # the year 9000 and past it
])
def test_out_of_range_at_both_ends(value: int | float | str) -> None:
    with pytest.raises(InvalidArgument, match=r"as_of '.*' is out of range \(1970 to 9000\)"):
        parse_span(value, "as_of")


@pytest.mark.parametrize("value", ["yesterday", "2025-13-01", float("nan"), "12:00", "1,5"])
def test_what_is_no_instant_at_all_says_so(value: float | str) -> None:
    with pytest.raises(InvalidArgument, match="neither ISO-8601"):
        parse_span(value, "as_of")


@pytest.mark.parametrize("value", [0, "0", 1_700_000_000, "1700000000.25", "8999-12-31T23:59:59Z", 32503680000 - 1])
def test_the_ends_of_the_range_are_accepted(value: int | str) -> None:
    assert 1970 <= parse_span(value, "as_of").start.year < 9000
