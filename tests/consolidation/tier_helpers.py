"""What the consolidation tests write and who they search as."""

from __future__ import annotations

from typing import Any

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.testing.tiers import Handlers


def fact(source: str, target: str, relation: str, text: str) -> dict[str, Any]:
    """One fact of a `write_episode` call, as an extractor would send it."""
    return {"source": source, "target": target, "relation": relation, "fact": text, "confidence": "extracted"}


def shared_caller(handlers: Handlers) -> Caller:
    """An agent that reads and writes the scope `shared` of the handlers' org."""
    return Caller(org=handlers.org, agent_id="claude-code", read_scopes=["shared"], write_scopes=["shared"])
