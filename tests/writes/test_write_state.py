"""The write's state object (services/writes/write_state.py) and the order its steps refuse in.

Handler tier: real routes, real Postgres on one rolled-back transaction, the real model.
"""

from __future__ import annotations

from typing import Any

import pytest

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument, ScopeDenied
from echo_memory.libs.core.contracts.write import WriteEpisodeInput
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.writes.write_state import EpisodeWrite
from tests.writes.conftest import episode, fact

TWO_ANSWERS = episode(
    [("Stripe", "vendor"), ("Ledger", "service")],
    [fact("Stripe", "Ledger", "pays out to", "Stripe pays out to the ledger.")],
    entity_resolutions=[{"mention": "Stripe", "entity_id": "new"},
                        {"mention": "stripe", "entity_id": "00000000-0000-4000-8000-000000000000"}],
)


async def test_names_of_one_entity_are_one_mention_and_only_used_ones_are_referenced(
    handlers: Handlers, embedder: MiniLM
) -> None:
    declared: list[dict[str, Any]] = [
        {"name": "PostgreSQL", "type": "database", "aliases": ["Postgres"]}, {"name": "postgres", "type": "database"},
        {"name": "Orders service", "type": "service"}, {"name": "Redis", "type": "cache"}]
    args = WriteEpisodeInput.model_validate(episode(
        declared,
        [fact("Orders service", "Postgres", "stores orders in", "The orders service stores orders in PostgreSQL.")],
        entity_resolutions=[{"mention": "Fraud engine", "entity_id": "new"}]))
    caller = Caller(org=handlers.org, agent_id="claude", write_scopes=["*"])
    write = EpisodeWrite(handlers.conn, caller, args, embedder)
    assert write.mention("postgres") is write.mention("PostgreSQL") is write.mention(" POSTGRES ")
    assert [(m.name, m.type, m.referenced) for m in write.mentions()] == [
        ("PostgreSQL", "database", True), ("Orders service", "service", True), ("Redis", "cache", False),
        ("Fraud engine", "unknown", False)]


async def test_the_scope_is_refused_before_conflicting_resolutions(handlers: Handlers) -> None:
    reader = Caller(org=handlers.org, agent_id="reader", read_scopes=["*"], write_scopes=[])
    with pytest.raises(ScopeDenied):
        await handlers.call(reader, "writes", "write_episode", TWO_ANSWERS)
    writer = Caller(org=handlers.org, agent_id="writer", read_scopes=["*"], write_scopes=["*"])
    with pytest.raises(InvalidArgument, match="two different resolutions"):
        await handlers.call(writer, "writes", "write_episode", TWO_ANSWERS)

