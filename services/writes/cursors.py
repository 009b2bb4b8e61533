"""The page cursors of the writes service's listing verbs: a row's time and id, `<iso time>|<uuid>`."""

from __future__ import annotations

import uuid
from datetime import datetime

from echo_memory.libs.core.contracts.errors import InvalidArgument


def make_cursor(at: datetime, row_id: object) -> str:
    """The cursor that continues after the row written at `at` with id `row_id`."""
    return f"{at.isoformat()}|{row_id}"


def read_cursor(cursor: str | None, verb: str) -> tuple[datetime | None, str | None]:
    """(time, id) of a cursor `verb` returned, (None, None) for the first page.

    Raises InvalidArgument for a cursor this code did not make.
    """
    if not cursor:
        return None, None
    try:
        stamp, ident = cursor.split("|", 1)
        return datetime.fromisoformat(stamp), str(uuid.UUID(ident))
    except ValueError:
        raise InvalidArgument(f"cursor is not a next_cursor {verb} returned") from None
