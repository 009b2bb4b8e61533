"""Fixtures for the retrieval tests: every service on the in-memory broker, for the answers that
depend on which of two writes came first (each request commits at its own time there)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from echo_memory.libs.core.config import Settings
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing.agents import Routes, routed_services


@pytest.fixture
async def routes(database_url: str, org: str, embedder: MiniLM) -> AsyncIterator[Routes]:
    """Every service's routes on the in-memory broker, each request committing on the test's database."""
    async with routed_services(Settings(org=org), embedder=embedder, database_url=database_url) as running:
        yield running
