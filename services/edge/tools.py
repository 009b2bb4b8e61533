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
from typing import Any

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
from echo_memory.libs.core.contracts.verbs import Verb, verb
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
class ToolSpec:
    """A tool: the bus verb it calls (its service, models and time-out) and what clients are told."""

    verb: Verb[Any, Any]
    description: str
    read_only: bool

    @property
    def name(self) -> str:
        return self.verb.name

    @property
    def input_model(self) -> type[BaseModel]:
        return self.verb.input

    @property
    def output_model(self) -> type[BaseModel]:
        return self.verb.output


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(verb("writes", "write_episode"), instructions.WRITE_EPISODE, read_only=False),
    ToolSpec(verb("retrieval", "query_memory"), instructions.QUERY_MEMORY, read_only=True),
    ToolSpec(verb("writes", "record_recall_save"), instructions.RECORD_RECALL_SAVE, read_only=False),
    ToolSpec(verb("writes", "pending_documents"), instructions.PENDING_DOCUMENTS, read_only=True),
    ToolSpec(verb("writes", "mark_ingested"), instructions.MARK_INGESTED, read_only=False),
    ToolSpec(verb("writes", "pending_episodes"), instructions.PENDING_EPISODES, read_only=True),
    ToolSpec(verb("writes", "mark_distilled"), instructions.MARK_DISTILLED, read_only=False),
    ToolSpec(verb("causal", "trace_cause"), instructions.TRACE_CAUSE, read_only=True),
    ToolSpec(verb("audit", "get_audit_log"), instructions.GET_AUDIT_LOG, read_only=True),
    ToolSpec(verb("consolidation", "brief"), instructions.BRIEF, read_only=True),
)


class _RawArguments(ArgModelBase):
    """Hands the tool every argument as sent; the contract model validates them."""

    model_config = ConfigDict(extra="allow")

    def model_dump_one_level(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def error_result(error: EchoError, spec: ToolSpec | None = None) -> mcp_types.CallToolResult:
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
    spec: ToolSpec, bus: BusClient, timeouts: Timeouts, caller_of: CallerSource, guards: EdgeGuards
):
    service = spec.verb.service
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
            if spec.name == "query_memory":
                # Result size is bounded here, whatever the caller asks.
                arguments = cap_max_tokens(arguments, limits.default_max_tokens, limits.max_result_tokens)
            args = parse_args(spec.input_model, strip_delimiters(arguments))
            result = await bus.call_by_name(
                caller=caller,
                service=service,
                verb=spec.name,
                args=args.model_dump(mode="json", exclude_unset=True),
                timeout=timeout,
            )
        except EchoError as exc:
            return error_result(exc, spec)
        return _success(spec, result)

    tool.__name__ = spec.name
    tool.__doc__ = spec.description
    return tool


# Tools whose results carry stored text: their TEXT content is framed as recalled data (query_memory
# has its own numbered rendering); the rest echo ids and the caller's own arguments.
FRAMED_TOOLS = frozenset({"trace_cause", "pending_documents", "pending_episodes", "get_audit_log"})


def _success(spec: ToolSpec, result: dict[str, Any]) -> mcp_types.CallToolResult:
    if spec.name == "query_memory":
        text = render_recall(result)
    elif spec.name == "brief":
        text = BriefResult.model_validate(result).text  # framed by the consolidation service
    elif spec.name in FRAMED_TOOLS:
        text = render_framed(spec.output_model.model_validate(result).model_dump(mode="json"))
    else:
        text = _json_text(spec, result)
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)], structured_content=result, is_error=False
    )


def _json_text(spec: ToolSpec, result: dict[str, Any]) -> str:
    return spec.output_model.model_validate(result).model_dump_json(indent=2)


def register_tools(
    server: MCPServer,
    bus: BusClient,
    timeouts: Timeouts,
    caller_of: CallerSource,
    guards: EdgeGuards | None = None,
) -> None:
    """Add all ten tools to `server`, with the contract models' schemas."""
    guards = guards or EdgeGuards()
    for spec in TOOLS:
        add_contract_tool(server, spec, _make_tool(spec, bus, timeouts, caller_of, guards))


def add_contract_tool(server: MCPServer, spec: ToolSpec, fn: Callable[..., Any]) -> None:
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
