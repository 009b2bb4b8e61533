"""The ten MCP tools: each validates with its contract model and makes one bus request.

Tool input schemas are the contract models' JSON schemas, so the edge and the services agree by
construction. Arguments reach the tool unparsed and are validated here, so a bad call gets the
same typed error (`invalid_argument`, retryable false) as any other refusal.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic

import mcp_types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from pydantic import BaseModel, ConfigDict

from echo_memory.libs.core.config import Timeouts
from echo_memory.libs.core.config.edge import EdgeSettings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.consolidation import BriefResult
from echo_memory.libs.core.contracts.errors import TOOL_ERROR_META_KEY, EchoError, ErrorInfo
from echo_memory.libs.core.contracts.framing import render_framed, render_recall, strip_delimiters
from echo_memory.libs.core.contracts.parsing import parse_args
from echo_memory.libs.core.contracts.query import QueryMemoryResult
from echo_memory.libs.core.contracts.verbs import (
    BRIEF,
    GET_AUDIT_LOG,
    MARK_DISTILLED,
    MARK_INGESTED,
    PENDING_DOCUMENTS,
    PENDING_EPISODES,
    QUERY_MEMORY,
    RECORD_RECALL_SAVE,
    TRACE_CAUSE,
    WRITE_EPISODE,
    In,
    Out,
    Verb,
)
from echo_memory.libs.core.contracts.write import WriteEpisodeResult
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.services.edge import instructions
from echo_memory.services.edge.limits import RateLimiter, cap_max_tokens
from echo_memory.services.edge.metrics import EdgeMetrics
from echo_memory.services.edge.schemas import client_output_schema

CallerSource = Callable[[Context], Caller]


@dataclass
class EdgeGuards:
    """What every tool call passes through besides validation: rate limit, result cap, metrics."""

    settings: EdgeSettings = field(default_factory=EdgeSettings)
    limiter: RateLimiter | None = None
    metrics: EdgeMetrics = field(default_factory=EdgeMetrics)

    def __post_init__(self) -> None:
        if self.limiter is None:
            self.limiter = RateLimiter(self.settings.rate_per_minute, self.settings.rate_burst)


def rate_key(caller: Caller) -> str:
    """The bucket a call counts against: its bearer token (hashed), else the caller's identity (stdio)."""
    access = get_access_token()
    if access is not None:
        return hashlib.sha256(access.token.encode("utf-8")).hexdigest()[:32]
    return f"{caller.org}/{caller.agent_id}"


@dataclass(frozen=True)
class ToolSpec(Generic[In, Out]):
    """A tool: the bus verb it calls (its service, models and time-out), what clients are told, and
    `render`, the text content a model reads for a result (the structured content is the result itself).
    """

    verb: Verb[In, Out]
    description: str
    read_only: bool
    render: Callable[[Out], str]

    @property
    def name(self) -> str:
        return self.verb.name

    @property
    def input_model(self) -> type[In]:
        return self.verb.input

    @property
    def output_model(self) -> type[Out]:
        return self.verb.output


def json_text(result: BaseModel) -> str:
    """Results that echo ids and the caller's own arguments: their JSON, as is."""
    return result.model_dump_json(indent=2)


def framed_text(result: BaseModel) -> str:
    """Results that carry stored text: framed as recalled data, never as instructions."""
    return render_framed(result.model_dump(mode="json"))


def recall_text(result: QueryMemoryResult) -> str:
    """query_memory's own numbered, framed rendering."""
    return render_recall(result.model_dump(mode="json"))


def brief_text(result: BriefResult) -> str:
    """The brief as the consolidation service framed it."""
    return result.text


# Not annotated: a `tuple[ToolSpec[Any, Any], ...]` context would let mypy infer Any for each spec
# and stop checking each renderer against its verb's result model.
TOOLS = (
    ToolSpec(WRITE_EPISODE, instructions.WRITE_EPISODE, read_only=False, render=json_text),
    ToolSpec(QUERY_MEMORY, instructions.QUERY_MEMORY, read_only=True, render=recall_text),
    ToolSpec(RECORD_RECALL_SAVE, instructions.RECORD_RECALL_SAVE, read_only=False, render=json_text),
    ToolSpec(PENDING_DOCUMENTS, instructions.PENDING_DOCUMENTS, read_only=True, render=framed_text),
    ToolSpec(MARK_INGESTED, instructions.MARK_INGESTED, read_only=False, render=json_text),
    ToolSpec(PENDING_EPISODES, instructions.PENDING_EPISODES, read_only=True, render=framed_text),
    ToolSpec(MARK_DISTILLED, instructions.MARK_DISTILLED, read_only=False, render=json_text),
    ToolSpec(TRACE_CAUSE, instructions.TRACE_CAUSE, read_only=True, render=framed_text),
    ToolSpec(GET_AUDIT_LOG, instructions.GET_AUDIT_LOG, read_only=True, render=framed_text),
    ToolSpec(BRIEF, instructions.BRIEF, read_only=True, render=brief_text),
)


class _RawArguments(ArgModelBase):
    """Hands the tool every argument as sent; the contract model validates them."""

    model_config = ConfigDict(extra="allow")

    def model_dump_one_level(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def error_result(error: EchoError, spec: ToolSpec[Any, Any] | None = None) -> mcp_types.CallToolResult:
    """A tool error: the code, message and `retryable` as text and in `_meta`.

    Structured content must match the tool's output schema, so only write_episode carries it: its
    result shape has room for a refusal (`stored: false`, `not_stored: "refused"`, `error`).
    """
    info = error.to_info()
    text = f"{info.code}: {info.message} (retryable: {str(info.retryable).lower()})"
    structured = None
    if spec is not None and spec.output_model is WriteEpisodeResult:
        refusal = WriteEpisodeResult(stored=False, not_stored="refused", retryable=info.retryable, error=info)
        structured = refusal.model_dump(mode="json")
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=True,
        meta={TOOL_ERROR_META_KEY: info.model_dump(mode="json")},
    )


def error_info(result: mcp_types.CallToolResult) -> ErrorInfo | None:
    """The typed error of a tool result, or None for a success."""
    meta = result.meta or {}
    raw = meta.get(TOOL_ERROR_META_KEY)
    return ErrorInfo.model_validate(raw) if raw else None


def client_name(ctx: Context) -> str | None:
    """The MCP client's self-reported name (provenance only; identity comes from the token)."""
    try:
        params = ctx.session.client_params
    except (AttributeError, LookupError, ValueError):
        return None
    info = getattr(params, "client_info", None) if params is not None else None
    name = getattr(info, "name", None)
    return str(name)[:100] if name else None


def _make_tool(  # type: ignore[no-untyped-def]
    spec: ToolSpec[In, Out], bus: BusClient, timeouts: Timeouts, caller_of: CallerSource, guards: EdgeGuards
):
    timeout = float(getattr(timeouts, spec.verb.timeout))
    limits = guards.settings

    async def tool(ctx: Context, **arguments: Any) -> mcp_types.CallToolResult:
        started = time.monotonic()
        result = await _call(ctx, arguments)
        error = error_info(result)
        outcome = error.code if error is not None else "ok"
        guards.metrics.record(spec.name, outcome, time.monotonic() - started)
        return result

    async def _call(ctx: Context, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        try:
            caller = caller_of(ctx)
            assert guards.limiter is not None
            guards.limiter.check(rate_key(caller))
            if spec.verb is QUERY_MEMORY:
                # Result size is bounded here, whatever the caller asks.
                arguments = cap_max_tokens(arguments, limits.default_max_tokens, limits.max_result_tokens)
            args = parse_args(spec.input_model, strip_delimiters(arguments))
            result = await bus.call(spec.verb, args, caller=caller, timeout=timeout)
        except EchoError as exc:
            return error_result(exc, spec)
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=spec.render(result))],
            structured_content=result.model_dump(mode="json"),
            is_error=False,
        )

    tool.__name__ = spec.name
    tool.__doc__ = spec.description
    return tool


def register_tools(
    server: MCPServer,
    bus: BusClient,
    timeouts: Timeouts,
    caller_of: CallerSource,
    guards: EdgeGuards | None = None,
) -> None:
    """Add all ten tools to `server`, with the contract models' schemas."""
    guards = guards or EdgeGuards()
    specs: tuple[ToolSpec[Any, Any], ...] = TOOLS
    for spec in specs:
        add_contract_tool(server, spec, _make_tool(spec, bus, timeouts, caller_of, guards))


def add_contract_tool(server: MCPServer, spec: ToolSpec[Any, Any], fn: Callable[..., Any]) -> None:
    """Register `fn` as `spec`'s tool, publishing the contract models' schemas and handing it raw arguments."""
    server.add_tool(
        fn,
        name=spec.name,
        description=spec.description,
        annotations=mcp_types.ToolAnnotations(read_only_hint=spec.read_only, destructive_hint=False),
    )
    registered = server._tool_manager.get_tool(spec.name)  # the SDK has no public setter for schemas
    assert registered is not None
    registered.fn_metadata.arg_model = _RawArguments
    registered.fn_metadata.output_schema = client_output_schema(spec.output_model)
    registered.parameters = spec.input_model.model_json_schema()
