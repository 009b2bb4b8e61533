"""The seven MCP tools: each validates with its contract model and makes one bus request.

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

from libs.bus.client import BusClient
from libs.bus.service import parse_args
from libs.config import Timeouts
from libs.contracts.audit import GetAuditLogInput, GetAuditLogResult
from libs.contracts.bus import Caller
from libs.contracts.causal import TraceCauseInput, TraceCauseResult
from libs.contracts.documents import (
    MarkIngestedInput,
    MarkIngestedResult,
    PendingDocumentsInput,
    PendingDocumentsResult,
    RecordRecallSaveInput,
    RecordRecallSaveResult,
)
from libs.contracts.errors import EchoError, ErrorInfo
from libs.contracts.query import QueryMemoryInput, QueryMemoryResult
from libs.contracts.subjects import TOOL_SERVICE
from libs.contracts.write import WriteEpisodeInput, WriteEpisodeResult
from services.edge import instructions
from services.edge.limits import RateLimiter, cap_max_tokens
from services.edge.metrics import EdgeMetrics
from services.edge.render import render_recall, strip_delimiters
from services.edge.schemas import client_output_schema
from services.edge.settings import EdgeSettings

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
    name: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    description: str
    timeout: str  # a field of Timeouts
    read_only: bool


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("write_episode", WriteEpisodeInput, WriteEpisodeResult, instructions.WRITE_EPISODE, "write", False),
    ToolSpec("query_memory", QueryMemoryInput, QueryMemoryResult, instructions.QUERY_MEMORY, "read", True),
    ToolSpec(
        "record_recall_save", RecordRecallSaveInput, RecordRecallSaveResult, instructions.RECORD_RECALL_SAVE,
        "write", False,
    ),
    ToolSpec(
        "pending_documents", PendingDocumentsInput, PendingDocumentsResult, instructions.PENDING_DOCUMENTS,
        "read", True,
    ),
    ToolSpec("mark_ingested", MarkIngestedInput, MarkIngestedResult, instructions.MARK_INGESTED, "write", False),
    ToolSpec("trace_cause", TraceCauseInput, TraceCauseResult, instructions.TRACE_CAUSE, "read", True),
    ToolSpec("get_audit_log", GetAuditLogInput, GetAuditLogResult, instructions.GET_AUDIT_LOG, "read", True),
)


class _RawArguments(ArgModelBase):
    """Hands the tool every argument as sent; the contract model validates them."""

    model_config = ConfigDict(extra="allow")

    def model_dump_one_level(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def error_result(error: EchoError) -> mcp_types.CallToolResult:
    info = error.to_info()
    return _error_from_info(info, {"error": info.model_dump(mode="json")})


def _error_from_info(info: ErrorInfo, structured: dict[str, Any]) -> mcp_types.CallToolResult:
    text = f"{info.code}: {info.message} (retryable: {str(info.retryable).lower()})"
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)], structured_content=structured, is_error=True
    )


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
    service = TOOL_SERVICE[spec.name]
    timeout = float(getattr(timeouts, spec.timeout))
    limits = guards.settings

    async def tool(ctx: Context, **arguments: Any) -> mcp_types.CallToolResult:
        started = time.monotonic()
        result = await _call(ctx, arguments)
        outcome = "ok"
        if result.is_error and isinstance(result.structured_content, dict):
            error = result.structured_content.get("error") or {}
            outcome = str(error.get("code", "error"))
        guards.metrics.record(spec.name, outcome, time.monotonic() - started)
        return result

    async def _call(ctx: Context, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        try:
            caller = caller_of(ctx)
            assert guards.limiter is not None
            guards.limiter.check(rate_key(caller))
            if spec.name == "query_memory":
                # Result size is bounded here, whatever the caller asks (issue 6).
                arguments = cap_max_tokens(arguments, limits.default_max_tokens, limits.max_result_tokens)
            args = parse_args(spec.input_model, strip_delimiters(arguments))
            result = await bus.call(
                caller=caller,
                service=service,
                verb=spec.name,
                args=args.model_dump(mode="json", exclude_unset=True),
                timeout=timeout,
            )
        except EchoError as exc:
            if spec.output_model is WriteEpisodeResult:
                # write_episode answers with its full shape even when it fails.
                info = exc.to_info()
                body = WriteEpisodeResult(stored=False, not_stored="refused", retryable=info.retryable, error=info)
                return _error_from_info(info, body.model_dump(mode="json"))
            return error_result(exc)
        return _success(spec, result)

    tool.__name__ = spec.name
    tool.__doc__ = spec.description
    return tool


def _success(spec: ToolSpec, result: dict[str, Any]) -> mcp_types.CallToolResult:
    error = result.get("error")
    if error:  # a write that was refused carries its reason in the result itself
        return _error_from_info(ErrorInfo.model_validate(error), result)
    text = render_recall(result) if spec.name == "query_memory" else _json_text(spec, result)
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
    """Add all seven tools to `server`, with the contract models' schemas."""
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
