"""Helpers for the write-path tests: payload builders, MCP calls, bus calls, row counts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.local.stack import tool_error
from echo_memory.libs.server.bus.broker import make_broker
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.libs.testing import EchoStack
from echo_memory.services.edge.tools import TOOLS, error_result

WRITE_EPISODE = next(spec for spec in TOOLS if spec.name == "write_episode")

TABLES = (
    "entities", "entity_aliases", "episodes", "facts", "audit_log", "outbox", "idempotency",
    "recall_saves", "documents", "document_ingestions",
)
RESULT_KEYS = {"stored", "not_stored", "partial", "edges_created", "restated", "deferred", "aliased", "retryable", "error",
               "scope"}


def fact(source: str, target: str, relation: str, text: str, confidence: str = "extracted", **extra: Any) -> dict[str, Any]:
    return {"source": source, "target": target, "relation": relation, "fact": text, "confidence": confidence, **extra}


def episode(entities: list[tuple[str, str]] | list[dict[str, Any]], facts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    ents = [e if isinstance(e, dict) else {"name": e[0], "type": e[1]} for e in entities]
    return {"session_id": "s-1", "entities": ents, "facts": facts, **extra}


PAYMENTS = episode(
    [("Payments service", "service"), ("Stripe", "vendor")],
    [fact("Payments service", "Stripe", "charges cards through", "The payments service charges cards through Stripe.")],
)


async def call(client: Any, tool: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """(is_error, structured content) of one MCP tool call; an error's typed `error` is always in it."""
    result = await client.call_tool(tool, args)
    if result.is_error:
        return True, {**(result.structured_content or {}), "error": tool_error(result)}
    assert result.structured_content is not None, result.content
    return False, dict(result.structured_content)


COUNT_ALL = "SELECT " + ", ".join(f"(SELECT count(*) FROM {t})" for t in TABLES)


async def counts(database: str | psycopg.AsyncConnection) -> dict[str, int]:
    """Rows in every table the write path touches (one round trip)."""
    if isinstance(database, psycopg.AsyncConnection):
        row = await (await database.execute(COUNT_ALL)).fetchone()
        return dict(zip(TABLES, row, strict=True))  # type: ignore[arg-type]
    async with await psycopg.AsyncConnection.connect(database, autocommit=True) as conn:
        return await counts(conn)


async def sql(database_url: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchall() if cur.description else []


class Bus:
    """Direct bus requests to the writes service as one agent (what the edge sends)."""

    def __init__(self, client: BusClient, org: str) -> None:
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
        return await self.client.call_by_name(caller=who, service="writes", verb=verb, args=args, timeout=30)


@pytest.fixture
async def bus(stack: EchoStack) -> AsyncIterator[Bus]:
    broker = make_broker(stack.nats_url)
    await broker.start()
    try:
        yield Bus(BusClient(broker), stack.org)
    finally:
        await broker.stop()
