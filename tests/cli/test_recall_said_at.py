"""`recall` (and every client reading the recall block) shows when an imported turn was said.

Handler tier: the real writes and retrieval handlers on a rolled-back transaction.
"""

from __future__ import annotations

from datetime import UTC, datetime

from echo_memory.libs.core.contracts.framing import render_recall
from echo_memory.libs.testing.tiers import Handlers

SAID = datetime(2024, 3, 1, 9, 1, tzinfo=UTC)


async def test_an_imported_turn_shows_when_it_was_said(handlers: Handlers) -> None:
    episodes = [{"kind": "turn", "content": "Dana: the kiln in studio B cracked on Friday", "speaker": "Dana",
                 "session_id": "chat-1", "seq": 0, "occurred_at": int(SAID.timestamp())}]
    await handlers.admin_call("writes", "import_episodes", {"episodes": episodes})
    result = await handlers.admin_call("retrieval", "query_memory", {"query": "what happened to the kiln?"})
    line = next(line for line in render_recall(result).splitlines() if "kiln in studio B" in line)
    assert "said 2024-03-01T09:01:00" in line, line
    written = str(result["results"][0]["provenance"]["written_at"])[:19]
    assert f"stored {written}" in line and written != "2024-03-01T09:01:00"


async def test_a_turn_stored_as_it_was_said_shows_one_time(handlers: Handlers) -> None:
    episodes = [{"kind": "turn", "content": "Eli: the glaze order ships Monday", "session_id": "chat-2", "seq": 0}]
    await handlers.admin_call("writes", "import_episodes", {"episodes": episodes})
    result = await handlers.admin_call("retrieval", "query_memory", {"query": "when does the glaze order ship?"})
    line = next(line for line in render_recall(result).splitlines() if "glaze order" in line)
    assert "said " not in line and "stored " not in line, line
