"""Factories for tests below the full stack: agents that call tools as the edge does, scopes, episodes.

An `Agent` makes the call an MCP client makes through the edge, without HTTP or a token: the
edge's own argument handling (`strip_delimiters`, the `max_tokens` cap, the contract model) and
its own error result, then the verb on whichever tier the test runs:

- `Handlers` (libs/testing/tiers.py): one rolled-back connection, so every row a test writes carries
  the same `now()`; tests that compare timestamps across writes need the next tier.
- `Routes` (`routed_services`): every service's router on FastStream's in-memory broker, each
  request committing on its own pooled connection as in production, on the test's own database.

What the edge adds besides (the token check, the rate limit, the MCP transport, the tools' text
content) is shown by tests/edge on the full stack.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import mcp_types
import psycopg
from faststream.nats import TestNatsBroker

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.config.edge import EdgeSettings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import TOOL_ERROR_META_KEY, EchoError
from echo_memory.libs.core.contracts.framing import strip_delimiters
from echo_memory.libs.core.contracts.parsing import parse_args
from echo_memory.libs.core.contracts.verbs import verb as verb_spec
from echo_memory.libs.server.bus.broker import make_broker
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.service.context import ServiceContext
from echo_memory.libs.server.service.registry import SERVICES
from echo_memory.libs.server.service.routes import build_router
from echo_memory.libs.server.store import access
from echo_memory.libs.server.store.pool import OrgDatabases
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.edge.limits import cap_max_tokens
from echo_memory.services.edge.tools import TOOLS, ToolSpec, error_result

# A broker that is never connected: TestNatsBroker answers in memory.
_UNUSED_NATS = "nats://127.0.0.1:1"
_EDGE = EdgeSettings()
_TOOLS: dict[str, ToolSpec[Any, Any]] = {spec.name: spec for spec in TOOLS}


class Answers(Protocol):
    """A tier that answers verbs: `Handlers` or `Routes`."""

    org: str

    async def call(self, caller: Caller, service: str, verb: str, args: dict[str, Any]) -> dict[str, Any]: ...

    async def admin_call(self, service: str, verb: str, args: dict[str, Any]) -> dict[str, Any]: ...


class Routes:
    """Every service's routes on one in-memory broker; `call` and `admin_call` as `Handlers` has them."""

    def __init__(self, client: BusClient, settings: Settings, database_url: str) -> None:
        self.client = client
        self.settings = settings
        self.org = settings.org
        self.database_url = database_url

    async def call(self, caller: Caller, service: str, verb: str, args: dict[str, Any]) -> dict[str, Any]:
        timeout = float(getattr(self.settings.timeouts, verb_spec(service, verb).timeout))
        return await self.client.call_by_name(caller=caller, service=service, verb=verb, args=args, timeout=timeout)

    async def admin_call(self, service: str, verb: str, args: dict[str, Any]) -> dict[str, Any]:
        return await self.call(access.admin_caller(self.org), service, verb, args)


@asynccontextmanager
async def routed_services(settings: Settings, *, embedder: MiniLM, database_url: str) -> AsyncIterator[Routes]:
    """Every service's real router on FastStream's in-memory broker, on `database_url`, committing."""
    broker = make_broker(_UNUSED_NATS)
    databases = OrgDatabases(settings.org, database_url)
    for info in SERVICES:
        ctx = ServiceContext(name=info.name, settings=settings, broker=broker, databases=databases,
                             embedder=embedder if info.embedder else None)
        module = importlib.import_module(info.module)
        broker.include_router(build_router(ctx, module.routes(ctx)))
    try:
        async with TestNatsBroker(broker) as testing:
            yield Routes(BusClient(testing), settings, database_url)
    finally:
        await databases.close()


def caller(org: str, agent_id: str, *, read: list[str] | None = None, write: list[str] | None = None,
           tool: str | None = "pytest") -> Caller:
    """The identity the edge builds from a token of `agent_id` (the default grants unless given)."""
    return Caller(org=org, agent_id=agent_id,
                  read_scopes=list(access.DEFAULT_GRANTS) if read is None else read,
                  write_scopes=list(access.DEFAULT_GRANTS) if write is None else write, tool=tool)


class Agent:
    """One agent's tool calls, made as the edge makes them; `call_tool` returns what the MCP client gets."""

    def __init__(self, answers: Answers, agent_id: str, *, read: list[str] | None = None,
                 write: list[str] | None = None, tool: str | None = "pytest") -> None:
        self.answers = answers
        self.caller = caller(answers.org, agent_id, read=read, write=write, tool=tool)

    @property
    def agent_id(self) -> str:
        return self.caller.agent_id

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """The tool's result with the edge's own shapes: structured content, or its typed error in `_meta`."""
        spec = _TOOLS[name]
        try:
            if name == "query_memory":
                arguments = cap_max_tokens(arguments, _EDGE.default_max_tokens, _EDGE.max_result_tokens)
            args = parse_args(spec.input_model, strip_delimiters(arguments))
            result = await self.answers.call(self.caller, spec.verb.service, name,
                                             args.model_dump(mode="json", exclude_unset=True))
        except EchoError as exc:
            return error_result(exc, spec)
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=json.dumps(result))],
                                        structured_content=result, is_error=False)

    async def ok(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tool call that must succeed; its structured content."""
        result = await self.call_tool(name, arguments)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return dict(result.structured_content)


class ToolClient(Protocol):
    """What calls tools: the MCP SDK's client over HTTP, or an `Agent`."""

    def call_tool(self, name: str, arguments: dict[str, Any], /) -> Awaitable[Any]: ...


async def call(client: ToolClient, tool: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """(is_error, structured content) of one tool call; an error's typed `error` is always in it."""
    result = await client.call_tool(tool, args)
    if result.is_error:
        info = (result.meta or {}).get(TOOL_ERROR_META_KEY)
        assert info is not None, f"a tool error without its typed error: {result!r}"
        return True, {**(result.structured_content or {}), "error": dict(info)}
    assert result.structured_content is not None, result.content
    return False, dict(result.structured_content)


class Writer:
    """write_episode, query_memory, record_recall_save and get_audit_log as one agent's client calls them;
    each must succeed."""

    def __init__(self, client: ToolClient) -> None:
        self.client = client

    async def _ok(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(tool, args)
        assert not result.is_error, result.content
        return dict(result.structured_content)

    async def write(self, entities: list[Any], facts: list[dict[str, Any]], *,
                    session: str = "s-1", **extra: Any) -> dict[str, Any]:
        """One episode in project "ops" (unless `project` says otherwise); an entity is a (name, type) pair or its dict."""
        return await self._ok("write_episode", {"project": "ops", **episode(entities, facts, session=session), **extra})

    async def query(self, query: str, **extra: Any) -> dict[str, Any]:
        return await self._ok("query_memory", {"query": query, **extra})

    async def save(self, fact_id: str, read_id: str, note: str) -> dict[str, Any]:
        return await self._ok("record_recall_save", {"fact_id": fact_id, "read_id": read_id, "note": note})

    async def audit(self, **args: Any) -> dict[str, Any]:
        return await self._ok("get_audit_log", args)


def fact(source: str, target: str, relation: str, text: str, confidence: str = "extracted",
         **extra: Any) -> dict[str, Any]:
    """One fact of a write_episode call."""
    return {"source": source, "target": target, "relation": relation, "fact": text, "confidence": confidence, **extra}


def episode(entities: list[tuple[str, str]] | list[dict[str, Any]], facts: list[dict[str, Any]],
            *, session: str = "s-1", **extra: Any) -> dict[str, Any]:
    """write_episode's arguments; an entity is a (name, type) pair or its dict."""
    ents = [e if isinstance(e, dict) else {"name": e[0], "type": e[1]} for e in entities]
    return {"session_id": session, "entities": ents, "facts": facts, **extra}


PAYMENTS = episode(
    [("Payments service", "service"), ("Stripe", "vendor")],
    [fact("Payments service", "Stripe", "charges cards through", "The payments service charges cards through Stripe.")],
)


async def write_episodes(agent: Agent, n: int, *, scope: str | None = None, session: str = "s-1") -> list[str]:
    """`n` stored one-fact episodes about distinct entities; their fact ids, in order."""
    ids = []
    for i in range(n):
        body = episode([(f"Service {i}", "service"), (f"Store {i}", "database")],
                       [fact(f"Service {i}", f"Store {i}", "keeps data in", f"Service {i} keeps its data in store {i}.")],
                       session=session, **({"scope": scope} if scope else {}))
        written = await agent.ok("write_episode", body)
        assert written["stored"], written
        ids.append(written["edges_created"][0]["fact_id"])
    return ids


async def make_scope(answers: Answers, name: str, **options: Any) -> dict[str, Any]:
    """A named scope, created as the CLI creates one (admin `scope_create`)."""
    return await answers.admin_call("writes", "scope_create", {"name": name, **options})


async def issue_token(answers: Answers, agent_id: str, *, read: list[str] | None = None,
                      write: list[str] | None = None) -> str:
    """A token for `agent_id` stored where the tier's requests read (so the agent counts as wired)."""
    reads = list(access.DEFAULT_GRANTS) if read is None else read
    writes = list(access.DEFAULT_GRANTS) if write is None else write
    if isinstance(answers, Routes):
        async with await psycopg.AsyncConnection.connect(answers.database_url) as conn:  # commits on exit
            issued = await access.issue_token_async(conn, org=answers.org, agent_id=agent_id,
                                                    read_scopes=reads, write_scopes=writes)
    elif isinstance(answers, Handlers):
        issued = await access.issue_token_async(answers.conn, org=answers.org, agent_id=agent_id,
                                                read_scopes=reads, write_scopes=writes)
    else:
        raise TypeError(f"no database behind {answers!r}")
    return issued.token


async def wire(answers: Answers, agent_id: str, *, read: list[str] | None = None,
               write: list[str] | None = None) -> Agent:
    """An agent with a stored token (as `EchoStack.issue_token` makes), calling with the token's grants."""
    await issue_token(answers, agent_id, read=read, write=write)
    return Agent(answers, agent_id, read=read, write=write)


def timed_admin_call(answers: Answers) -> Callable[[str, str, dict[str, Any], float], Awaitable[dict[str, Any]]]:
    """`answers.admin_call` in the shape the CLI's commands take (`admin_session`: a time-out last),
    so a command's own code runs against a tier; the time-out goes unused, a tier answers in-process."""

    async def call(service: str, verb: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
        return await answers.admin_call(service, verb, args)

    return call
