"""Helpers for the edge tests: an extra edge with its own limits, an MCP client, the conformance runner."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from echo_memory.libs.core.config.edge import EdgeSettings
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing import mcp_http_client as mcp_client  # noqa: F401  (the edge tests' name for it)
from echo_memory.services.edge.app import RunningEdge, start_edge


@asynccontextmanager
async def extra_edge(stack: EchoStack, **limits: object) -> AsyncIterator[RunningEdge]:
    """Another HTTP edge on the stack's bus and services, with its own EdgeSettings."""
    settings = stack.settings.model_copy(update={"edge_port": free_port()})
    edge = await start_edge(settings, EdgeSettings(**limits))  # type: ignore[arg-type]
    try:
        yield edge
    finally:
        await edge.stop()


@dataclass(frozen=True)
class ConformanceRunner:
    node: Path
    cli: Path
    preload: Path
