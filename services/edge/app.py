"""Build and run the edge: MCP over streamable HTTP (bearer token) or over stdio (one identity)."""

from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import dataclass

import uvicorn
from faststream.nats import NatsBroker
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from libs.bus.broker import make_broker
from libs.bus.client import BusClient
from libs.config import Settings
from libs.contracts.bus import Caller
from libs.contracts.errors import EchoError, Unauthenticated
from libs.telemetry import setup_tracing
from services.edge.identity import BusTokenVerifier, caller_from_access, current_http_caller
from services.edge.instructions import SERVER_INSTRUCTIONS
from services.edge.tools import client_name, register_tools

log = logging.getLogger(__name__)

SERVER_NAME = "echo-memory"


def build_http_server(settings: Settings, broker: NatsBroker, port: int) -> MCPServer:
    """The MCP server for HTTP: every request needs a bearer token the org's writes service knows."""
    bus = BusClient(broker)
    verifier = BusTokenVerifier(bus, settings.timeouts.auth)
    base = f"http://{settings.edge_host}:{port}"
    server = MCPServer(
        SERVER_NAME,
        instructions=SERVER_INSTRUCTIONS,
        log_level="WARNING",
        token_verifier=verifier,
        auth=AuthSettings(
            issuer_url=base,  # type: ignore[arg-type]
            resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
            validate_token_resource=False,
            required_scopes=["memory"],
        ),
    )
    register_tools(server, bus, settings.timeouts, lambda ctx: current_http_caller(client_name(ctx)))
    _add_health_routes(server, broker)
    return server


def build_stdio_server(settings: Settings, broker: NatsBroker, caller: Caller) -> MCPServer:
    """The MCP server for stdio: the process was started with one token, so one identity."""
    server = MCPServer(SERVER_NAME, instructions=SERVER_INSTRUCTIONS, log_level="WARNING")
    register_tools(
        server,
        BusClient(broker),
        settings.timeouts,
        lambda ctx: caller.model_copy(update={"tool": client_name(ctx)}),
    )
    return server


def _add_health_routes(server: MCPServer, broker: NatsBroker) -> None:
    @server.custom_route("/healthz", methods=["GET"])
    async def healthz(request: Request) -> Response:
        # Liveness never depends on NATS or Postgres: an outage should gate traffic, not restart pods.
        return JSONResponse({"status": "ok"})

    @server.custom_route("/readyz", methods=["GET"])
    async def readyz(request: Request) -> Response:
        ready = await broker.ping(timeout=1.0)
        return JSONResponse({"status": "ready" if ready else "bus unreachable"}, status_code=200 if ready else 503)


def _transport_security(settings: Settings, port: int) -> TransportSecuritySettings:
    """DNS-rebinding protection: only our own host names, and browser origins on loopback."""
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", "127.0.0.1", "localhost"]
    if settings.edge_host not in ("127.0.0.1", "localhost"):
        hosts += [f"{settings.edge_host}:{port}", "*"] if settings.edge_host == "0.0.0.0" else [f"{settings.edge_host}:{port}"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=settings.edge_host != "0.0.0.0",
        allowed_hosts=hosts,
        allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}"],
    )


@dataclass
class RunningEdge:
    """The HTTP edge serving in the current event loop."""

    url: str
    broker: NatsBroker
    web: uvicorn.Server
    task: asyncio.Task[None]

    async def stop(self) -> None:
        self.web.should_exit = True
        await self.task
        await self.broker.stop()


async def start_edge(settings: Settings) -> RunningEdge:
    """Connect to the bus and serve MCP over HTTP; returns once the port accepts connections."""
    broker = make_broker(settings.nats_url or "")
    await broker.start()
    port = settings.edge_port or 8765
    server = build_http_server(settings, broker, port)
    app = server.streamable_http_app(transport_security=_transport_security(settings, port), host=settings.edge_host)
    web = uvicorn.Server(uvicorn.Config(app, host=settings.edge_host, port=port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(web.serve())
    while not web.started:
        if task.done():
            await broker.stop()
            task.result()  # re-raise why it could not start
            raise RuntimeError(f"the edge could not bind {settings.edge_host}:{port}")
        await asyncio.sleep(0.02)
    return RunningEdge(url=f"http://{settings.edge_host}:{port}/mcp", broker=broker, web=web, task=task)


async def serve_http(settings: Settings) -> int:
    setup_tracing("edge")
    edge = await start_edge(settings)
    print(f"echo-memory edge: ready on {edge.url}", flush=True)
    try:
        await edge.task
    finally:
        await edge.broker.stop()
    return 0


async def serve_stdio(settings: Settings) -> int:
    """Serve MCP on stdin/stdout for the token in ECHO_MEMORY_TOKEN (or --token)."""
    setup_tracing("edge")
    if settings.token is None:
        print("echo-memory mcp: set ECHO_MEMORY_TOKEN (or pass --token) to a token from `echo-memory token create`",
              file=sys.stderr)
        return 2
    broker = make_broker(settings.nats_url or "")
    await broker.start()
    try:
        verifier = BusTokenVerifier(BusClient(broker), settings.timeouts.auth)
        access = await verifier.verify_token(settings.token.get_secret_value())
        if access is None:
            raise Unauthenticated("the token is unknown or revoked")
        server = build_stdio_server(settings, broker, caller_from_access(access, None))
        await server.run_stdio_async()
    except EchoError as exc:
        print(f"echo-memory mcp: {exc.message}", file=sys.stderr)
        return 2
    finally:
        await broker.stop()
    return 0


def run_edge(settings: Settings) -> int:
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s edge %(levelname)s %(message)s")
    if settings.nats_url is None:
        print("echo-memory edge: ECHO_MEMORY_NATS_URL is not set", file=sys.stderr)
        return 2
    try:
        return asyncio.run(serve_http(settings))
    except KeyboardInterrupt:
        return 0


__all__ = ["build_http_server", "build_stdio_server", "run_edge", "serve_stdio"]
