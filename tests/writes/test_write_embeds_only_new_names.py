"""A write embeds its facts and only the entity names that may become entities.

Names that resolve exactly (stored name or alias) are resolved before the scope lock and never
embedded: embedding is most of a write's time. The model is real; the spy only records what
the writes service asked it to embed.
"""

from __future__ import annotations

from typing import Any

import pytest

from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing.agents import Agent
from echo_memory.libs.testing.tiers import Handlers
from tests.writes.conftest import call, episode, fact


@pytest.fixture
def asked(embedder: MiniLM, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every list of texts the writes service hands the (real) model, in order."""
    calls: list[list[str]] = []
    real = embedder.embed

    def spy(texts: list[str], batch_size: int = 64) -> Any:
        calls.append(list(texts))
        return real(texts, batch_size)

    monkeypatch.setattr(embedder, "embed", spy)
    return calls


async def test_known_names_are_not_embedded_again(handlers: Handlers, asked: list[list[str]]) -> None:
    first = episode([("Ledger service", "service"), ("Kafka", "broker")],
                    [fact("Ledger service", "Kafka", "publishes to", "The ledger service publishes entries to Kafka.")])
    second = episode([("ledger SERVICE", "service"), ("Kafka", "broker"), ("Flink", "processor")],
                     [fact("ledger SERVICE", "Kafka", "reads offsets from", "The ledger service reads offsets from Kafka."),
                      fact("Kafka", "Flink", "feeds", "Kafka feeds the Flink fraud job.")])
    client = Agent(handlers, "claude-code")
    _, stored = await call(client, "write_episode", first)
    assert stored["stored"] is True, stored
    asked.clear()
    _, stored = await call(client, "write_episode", second)
    assert stored["stored"] is True, stored
    # Two requests to the model, from two worker threads (so in either order): the facts, from
    # the start of the write, and the one new name, once the known ones are resolved.
    assert sorted(asked) == [["Flink"], ["The ledger service reads offsets from Kafka.", "Kafka feeds the Flink fraud job."]]
    # the known names still resolved to the stored entities (no duplicate node for "ledger SERVICE")
    assert {e["source"] for e in stored["edges_created"]} == {"Ledger service", "Kafka"}


async def test_names_no_fact_uses_are_not_embedded(handlers: Handlers, asked: list[list[str]]) -> None:
    # "Redis" is declared but no fact uses it, so it is never stored and needs no vector; "Kafka"
    # is declared new, so its vector is computed from the start, beside the fact's.
    body = episode([("Orders service", "service"), ("Kafka", "broker"), ("Redis", "cache")],
                   [fact("Orders service", "Kafka", "publishes to", "The orders service publishes to Kafka.")],
                   entity_resolutions=[{"mention": "Kafka", "entity_id": "new", "rationale": "first mention"}])
    client = Agent(handlers, "claude-code")
    _, stored = await call(client, "write_episode", body)
    assert stored["stored"] is True, stored
    assert sorted(asked) == [["Kafka"], ["Orders service"], ["The orders service publishes to Kafka."]]
