"""One write and one recall through a real MCP session: the proof that a wired system serves memory."""

from __future__ import annotations

from typing import Any

PROBE_EPISODE: dict[str, Any] = {
    "session_id": "s-1",
    "entities": [{"name": "billing", "type": "service"}, {"name": "Stripe", "type": "vendor"}],
    "facts": [{"source": "billing", "target": "Stripe", "relation": "calls",
               "fact": "billing calls Stripe for refunds", "confidence": "extracted"}],
}


async def write_and_recall(client: Any) -> None:
    """Store PROBE_EPISODE and find it again with a paraphrase; AssertionError with the reply otherwise."""
    written = await client.call_tool("write_episode", PROBE_EPISODE)
    assert not written.is_error, written
    found = await client.call_tool("query_memory", {"query": "who handles refunds"})
    assert not found.is_error and "Stripe" in str(found.structured_content), found
