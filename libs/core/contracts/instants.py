"""Times a caller passes (`as_of`, `since`, `until`): Unix seconds or ISO-8601, read as a span.

A value names the span of its own precision: integer seconds and ISO to the second cover that
whole second, ISO to the minute that minute, a date alone that day (UTC), a fraction the single
microsecond it names. A caller who takes `int(time.time())` right after a write therefore sees
the write `as_of` that second, instead of the store as it was at the second's first microsecond.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pydantic import StrictFloat, StrictInt, StrictStr

from echo_memory.libs.core.contracts.errors import InvalidArgument

# Strict, so a JSON `true` is an error rather than the second 1.
Instant = StrictInt | StrictFloat | StrictStr

# Any signed decimal, so a number far outside the range is called out of range, not "not a number".
_NUMBER = re.compile(r"^[+-]?\d+(\.\d+)?([eE][+-]?\d+)?$")
_ISO = re.compile(
    r"^\d{4}-\d{2}-\d{2}"
    r"(?:[T ](?P<hour>\d{2})(?::?(?P<minute>\d{2})(?::?(?P<second>\d{2})(?P<fraction>[.,]\d+)?)?)?"
    r"(?:Z|z|[+-]\d{2}(?::?\d{2})?)?)?$"
)
_MICROSECOND = timedelta(microseconds=1)
_FIRST_YEAR, _END_YEAR = 1970, 9000
_END_SECONDS = (datetime(_END_YEAR, 1, 1, tzinfo=UTC) - datetime(_FIRST_YEAR, 1, 1, tzinfo=UTC)).total_seconds()


@dataclass(frozen=True)
class Span:
    """The instants a value covers: `start` <= t < `end`."""

    start: datetime
    end: datetime

    @property
    def last(self) -> datetime:
        """The last instant of the span that Postgres can hold (microsecond resolution)."""
        return self.end - _MICROSECOND


def parse_span(value: int | float | str, name: str) -> Span:
    """The span `value` names, as aware UTC datetimes.

    Accepts Unix seconds (int, float or a numeric string) and ISO-8601 with `Z`, an offset, or
    none (read as UTC). Raises InvalidArgument naming `name` for anything else, a negative
    number, NaN or infinity, or an instant before 1970 or after the year 9000.
    """
    text = str(value).strip()
    out_of_range = InvalidArgument(f"{name} '{value}' is out of range ({_FIRST_YEAR} to {_END_YEAR})")
    try:
        if isinstance(value, int | float) or _NUMBER.match(text):
            seconds = float(value) if isinstance(value, int | float) else float(text)
            if seconds < 0 or seconds >= _END_SECONDS:  # infinities too; NaN fails both and is not a number
                raise out_of_range
            start = datetime.fromtimestamp(seconds, tz=UTC)
            whole = isinstance(value, int) or seconds.is_integer() and "." not in text
            step = timedelta(seconds=1) if whole else _MICROSECOND
        else:
            match = _ISO.match(text)
            if match is None:
                raise ValueError(text)
            start = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
            start = start.replace(tzinfo=UTC) if start.tzinfo is None else start.astimezone(UTC)
            step = _iso_step(match)
    except (ValueError, OverflowError, OSError):
        raise InvalidArgument(
            f"{name} '{value}' is neither ISO-8601 (2025-01-31T12:00:00Z) nor Unix seconds"
        ) from None
    if start.year < _FIRST_YEAR or start.year >= _END_YEAR:
        raise out_of_range
    return Span(start=start, end=start + step)


def _iso_step(match: re.Match[str]) -> timedelta:
    """How long the unit an ISO value was written to lasts."""
    if match["fraction"]:
        return _MICROSECOND
    if match["second"]:
        return timedelta(seconds=1)
    if match["minute"]:
        return timedelta(minutes=1)
    if match["hour"]:
        return timedelta(hours=1)
    return timedelta(days=1)
