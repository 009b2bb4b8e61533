"""`echo-memory bridge`: a stdio MCP server that forwards every tool call to a remote edge over HTTP.

For clients that only launch commands (Claude Desktop ignores remote servers in its config file),
so a machine connected to a remote edge with `echo-memory connect` can still wire them. The remote
edge does all checking; the bridge forwards arguments and results unchanged.
"""

from __future__ import annotations

import sys
from typing import Any

import httpx2
import mcp_types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer

from echo_memory.services.edge.app import SERVER_NAME
from echo_memory.services.edge.instructions import SERVER_INSTRUCTIONS
from echo_memory.services.edge.tools import TOOLS, ToolSpec, add_contract_tool


def _forward(spec: ToolSpec[Any, Any], remote: Client):  # type: ignore[no-untyped-def]
    async def tool(ctx: Context, **arguments: Any) -> mcp_types.CallToolResult:
        result = await remote.call_tool(spec.name, arguments)
        assert isinstance(result, mcp_types.CallToolResult)
        return result

    tool.__name__ = spec.name
    tool.__doc__ = spec.description
    return tool


def build_bridge(remote: Client) -> MCPServer:
    """The stdio server whose ten tools call `remote` (an initialized MCP client session)."""
    server = MCPServer(SERVER_NAME, instructions=remote.instructions or SERVER_INSTRUCTIONS, log_level="WARNING")
    for spec in TOOLS:
        add_contract_tool(server, spec, _forward(spec, remote))
    return server


async def serve_bridge(url: str, token: str) -> int:
    """Serve stdio until stdin closes; 2 with a message on stderr when the remote edge refuses us."""
    problem: str | None = None
    try:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http)) as remote,
        ):
            await build_bridge(remote).run_stdio_async()
    except* httpx2.HTTPStatusError as group:
        first = group.exceptions[0]
        while isinstance(first, ExceptionGroup):  # except* keeps any nesting of the raise
            first = first.exceptions[0]
        status = first.response.status_code
        reason = "the token was refused (unknown, revoked, or for another org)" if status == 401 else f"HTTP {status}"
        problem = f"{url}: {reason}"
    except* httpx2.HTTPError as group:
        problem = f"cannot reach {url} ({type(group.exceptions[0]).__name__})"
    if problem is not None:
        print(f"echo-memory bridge: {problem}", file=sys.stderr)
        return 2
    return 0


__all__ = ["build_bridge", "serve_bridge"]
