"""Fixtures for the write-path tests: direct bus calls, the in-memory broker tier; the shared payload
builders, tool calls and row counts come from libs/testing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.server.bus.broker import make_broker
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import PAYMENTS, Routes, call, episode, fact, routed_services
from echo_memory.libs.testing.rows import WRITE_TABLES, counts, sql
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.edge.tools import TOOLS, error_result

WRITE_EPISODE = next(spec for spec in TOOLS if spec.name == "write_episode")

TABLES = WRITE_TABLES
RESULT_KEYS = {"stored", "not_stored", "partial", "edges_created", "restated", "deferred", "aliased", "retryable", "error",
               "scope"}


class Bus:
    """Direct requests to the writes service as one agent (what the edge sends), over a `BusClient`
    or on the handler tier, without the edge's own argument check."""

    def __init__(self, client: BusClient | Handlers, org: str) -> None:
        self.client = client
        self.org = org

    async def write(self, args: dict[str, Any], agent: str = "fuzzer", **caller: Any) -> dict[str, Any]:
        """write_episode's result as an MCP client sees it: a refusal in the tool's result shape (the edge's own code)."""
        try:
            return await self.verb("write_episode", args, agent, **caller)
        except EchoError as exc:
            refusal = error_result(exc, WRITE_EPISODE).structured_content
            assert refusal is not None
            return dict(refusal)

    async def verb(self, verb: str, args: dict[str, Any], agent: str = "fuzzer", **caller: Any) -> dict[str, Any]:
        who = Caller(org=self.org, agent_id=agent, read_scopes=caller.get("read", ["shared", "solo"]),
                     write_scopes=caller.get("write", ["shared", "solo"]), tool="pytest")
        if isinstance(self.client, Handlers):
            return await self.client.call(who, "writes", verb, args)
        return await self.client.call_by_name(caller=who, service="writes", verb=verb, args=args, timeout=30)


@pytest.fixture
async def bus(stack: EchoStack) -> AsyncIterator[Bus]:
    broker = make_broker(stack.nats_url)
    await broker.start()
    try:
        yield Bus(BusClient(broker), stack.org)
    finally:
        await broker.stop()


@pytest.fixture
async def routes(database_url: str, org: str, embedder: MiniLM) -> AsyncIterator[Routes]:
    """Every service's routes on the in-memory broker, each request committing on the test's database."""
    async with routed_services(Settings(org=org), embedder=embedder, database_url=database_url) as running:
        yield running


__all__ = ["PAYMENTS", "RESULT_KEYS", "TABLES", "Bus", "call", "counts", "episode", "fact", "sql"]
