"""The two faster test tiers below `EchoStack`: handlers on one rolled-back transaction, routes on
FastStream's in-memory broker.

- `Handlers` calls every service's real routes through the runtime's own `answer` (argument
  parsing, the org check, the error seam, the output check) on one real Postgres connection whose
  outer transaction the test rolls back. No nats-server, no edge, no database clone per test.
- `routed` serves one service's real router on `TestNatsBroker`: the subscriber wiring, subject
  parameters, reply encoding and `BusClient`'s error mapping, without a nats-server.

What neither tier covers (the wire, the edge, commit visibility across connections, the outbox
relay) stays with the full-stack tests.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from faststream.nats import TestNatsBroker
from pgvector.psycopg import register_vector_async

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.bus import Caller, Request
from echo_memory.libs.core.contracts.errors import from_info
from echo_memory.libs.core.contracts.verbs import In, Out, Verb
from echo_memory.libs.server.bus.broker import make_broker
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.service.context import ServiceContext
from echo_memory.libs.server.service.registry import SERVICES, service_info
from echo_memory.libs.server.service.routes import RouteEntry, answer, build_router
from echo_memory.libs.server.store import access
from echo_memory.libs.server.store.pool import OrgDatabases

# A broker that is never connected: the handler tier's services publish nothing.
_UNUSED_NATS = "nats://127.0.0.1:1"


class OneConnection(OrgDatabases):
    """Every request's transaction is a savepoint of the test's one connection, and so is its reader.

    A failed request rolls back its savepoint only, as a failed request rolls back its own
    transaction in production; the test's outer transaction is rolled back at the end.
    """

    def __init__(self, org: str, conn: psycopg.AsyncConnection) -> None:
        super().__init__(org, None)
        self.conn = conn

    @asynccontextmanager
    async def transaction(self, org: str) -> AsyncIterator[psycopg.AsyncConnection]:
        async with self.conn.transaction():
            yield self.conn

    @asynccontextmanager
    async def reader(self, org: str) -> AsyncIterator[psycopg.AsyncConnection]:
        yield self.conn  # sees the test's uncommitted rows, which a second connection could not

    @asynccontextmanager
    async def autocommit(self, org: str) -> AsyncIterator[psycopg.AsyncConnection]:
        yield self.conn  # inside the test's transaction, like the reader

    async def url(self, org: str) -> str | None:
        return None  # another process's connection would not see the test's uncommitted rows

    async def close(self) -> None:
        return None


@asynccontextmanager
async def rolled_back(database_url: str) -> AsyncIterator[psycopg.AsyncConnection]:
    """A connection inside a transaction that is rolled back on exit, whatever the test wrote."""
    conn = await psycopg.AsyncConnection.connect(database_url)
    try:
        await register_vector_async(conn)
        async with conn.transaction(force_rollback=True):
            yield conn
    finally:
        await conn.close()


class Handlers:
    """Every service's routes, answered in-process on one connection.

    `call` returns the verb's result as a dict or raises its typed `EchoError`, exactly as
    `BusClient.call` does for the same request over NATS.
    """

    def __init__(self, conn: psycopg.AsyncConnection, org: str, embedder: MiniLM, settings: Settings | None = None):
        self.conn = conn
        self.org = org
        self.settings = settings or Settings(org=org)
        self._routes: dict[tuple[str, str], tuple[ServiceContext, RouteEntry]] = {}
        databases = OneConnection(org, conn)
        for info in SERVICES:
            ctx = ServiceContext(
                name=info.name, settings=self.settings, broker=make_broker(_UNUSED_NATS), databases=databases,
                embedder=embedder if info.embedder else None,
            )
            module = importlib.import_module(info.module)
            for route in module.routes(ctx):
                self._routes[(info.name, route.verb.name)] = (ctx, route)

    def context(self, service: str) -> ServiceContext:
        """`service`'s context as its routes built it (its background parts are in `extra`)."""
        return next(ctx for (name, _), (ctx, _) in self._routes.items() if name == service)

    async def call(self, caller: Caller, service: str, verb: str, args: dict[str, Any]) -> dict[str, Any]:
        ctx, route = self._routes[(service, verb)]
        reply = await answer(ctx, route, self.org, Request(caller=caller, args=args))
        if reply.error is not None:
            raise from_info(reply.error)
        assert reply.result is not None
        return reply.result

    async def admin_call(self, service: str, verb: str, args: dict[str, Any]) -> dict[str, Any]:
        """A call as the org's admin identity (what the CLI sends)."""
        return await self.call(access.admin_caller(self.org), service, verb, args)

    async def call_verb(self, caller: Caller, verb: Verb[In, Out], args: In) -> Out:
        """`call` as `BusClient.call` makes it: the fields set on `args` sent, the result as `verb.output`.

        Raises the verb's typed `EchoError`; pydantic's ValidationError if the result is not `verb.output`.
        """
        result = await self.call(caller, verb.service, verb.name, args.model_dump(mode="json", exclude_unset=True))
        return verb.output.model_validate(result)


@asynccontextmanager
async def routed(
    service: str, settings: Settings, *, embedder: MiniLM | None = None, database_url: str | None = None
) -> AsyncIterator[BusClient]:
    """`service`'s real router on FastStream's in-memory broker, and a `BusClient` that calls it.

    Requests run their handlers on `database_url` (pooled, committing as in production) when given.
    """
    info = service_info(service)
    broker = make_broker(_UNUSED_NATS)
    ctx = ServiceContext(
        name=service, settings=settings, broker=broker,
        databases=OrgDatabases(settings.org, database_url), embedder=embedder if info.embedder else None,
    )
    module = importlib.import_module(info.module)
    broker.include_router(build_router(ctx, module.routes(ctx)))
    try:
        async with TestNatsBroker(broker) as testing:
            yield BusClient(testing)
    finally:
        await ctx.databases.close()
