"""Build and run the edge: MCP over streamable HTTP (bearer token) or over stdio (one identity).

HTTP requests pass, outermost first: the Origin check (browser requests from other sites → 403),
the per-address gate on refused tokens (→ 429, services/edge/peer_gate.py), bearer authentication (→ 401), the SDK's Host check and body-size limit (→ 421 / 413), then the
MCP session; every tool call then passes the per-token rate limit before its one bus request.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import weakref
from dataclasses import dataclass
from typing import Any

import mcp_types
import nats.errors
import uvicorn
from faststream.nats import NatsBroker
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.config.edge import EdgeSettings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import EchoError, Unauthenticated
from echo_memory.libs.core.contracts.subjects import SERVICES
from echo_memory.libs.server import eventloop
from echo_memory.libs.server.bus.auth import BusAccess, CredentialsError, settings_credentials
from echo_memory.libs.server.bus.broker import make_broker
from echo_memory.libs.server.bus.client import BusClient, bus_connected
from echo_memory.libs.server.telemetry import setup_tracing
from echo_memory.services.edge.identity import BusTokenVerifier, caller_from_access, current_http_caller
from echo_memory.services.edge.instructions import SERVER_INSTRUCTIONS
from echo_memory.services.edge.limits import RateLimiter
from echo_memory.services.edge.metrics import scrape_services
from echo_memory.services.edge.peer_gate import PeerGate
from echo_memory.services.edge.readiness import not_ready_reason
from echo_memory.services.edge.tools import EdgeGuards, client_name, register_tools

log = logging.getLogger(__name__)

SERVER_NAME = "echo-memory"
SERVICE_NAMES = tuple(SERVICES)  # every service of the verb table; /metrics asks each of them
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def _orgs(settings: Settings, edge: EdgeSettings) -> list[str]:
    return edge.orgs or [settings.org]


def build_http_server(
    settings: Settings, broker: NatsBroker, port: int, edge: EdgeSettings | None = None
) -> tuple[MCPServer, BusTokenVerifier, EdgeGuards]:
    """The MCP server for HTTP: every request needs a bearer token the org's writes service knows.

    Returns the server, its token verifier (tests call `forget()` on it) and its guards.
    """
    edge = edge or EdgeSettings()
    guards = EdgeGuards(settings=edge)
    bus = BusClient(broker, on_error=guards.metrics.bus_error)
    verifier = BusTokenVerifier(
        bus, settings.timeouts.auth, cache_seconds=edge.token_cache_seconds, orgs=_orgs(settings, edge),
        failures=RateLimiter(edge.refused_per_minute, edge.refused_burst),
    )
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
    register_tools(server, bus, settings.timeouts, lambda ctx: current_http_caller(client_name(ctx)), guards)
    _add_logging_level(server)
    # "*" (every registered org, the chart's default) names no org to probe: probe the default org.
    probed = next((org for org in _orgs(settings, edge) if org != "*"), settings.org)
    _add_health_routes(server, broker, probed, guards if edge.metrics else None)
    return server, verifier, guards


def build_stdio_server(
    settings: Settings, broker: NatsBroker, caller: Caller, edge: EdgeSettings | None = None
) -> MCPServer:
    """The MCP server for stdio: the process was started with one token, so one identity."""
    server = MCPServer(SERVER_NAME, instructions=SERVER_INSTRUCTIONS, log_level="WARNING")
    register_tools(
        server,
        BusClient(broker),
        settings.timeouts,
        lambda ctx: caller.model_copy(update={"tool": client_name(ctx)}),
        EdgeGuards(settings=edge or EdgeSettings()),
    )
    _add_logging_level(server)
    return server


def _add_logging_level(server: MCPServer) -> None:
    """Accept `logging/setLevel` (protocol ≤ 2025-11-25) and remember the level per session.

    The edge sends no log notifications today, so nothing is filtered yet; the level is kept so a
    future notification honours it. Registered directly because the SDK's constructor flag for it
    raises a deprecation warning (the method is gone in protocol 2026-07-28).
    """
    levels: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    async def set_level(ctx: Any, params: mcp_types.SetLevelRequestParams) -> mcp_types.EmptyResult:
        try:
            levels[ctx.session] = params.level
        except TypeError:  # a session object that cannot be weakly referenced: nothing to remember
            pass
        return mcp_types.EmptyResult()

    server._lowlevel_server.add_request_handler("logging/setLevel", mcp_types.SetLevelRequestParams, set_level)


def _add_health_routes(server: MCPServer, broker: NatsBroker, org: str, guards: EdgeGuards | None) -> None:
    @server.custom_route("/healthz", methods=["GET"])
    async def healthz(request: Request) -> Response:
        # Liveness never depends on NATS or Postgres: an outage should gate traffic, not restart pods.
        return JSONResponse({"status": "ok"})

    @server.custom_route("/readyz", methods=["GET"])
    async def readyz(request: Request) -> Response:
        reason = await not_ready_reason(broker, org)
        return JSONResponse({"status": reason or "ready"}, status_code=503 if reason else 200)

    if guards is not None:
        metrics = guards.metrics

        @server.custom_route("/metrics", methods=["GET"])
        async def prometheus(request: Request) -> Response:
            # Every service replica's metrics too, asked over the bus on each scrape (metrics.py).
            answers: list[tuple[str, str]] = []
            answered: set[str] = set()
            if bus_connected(broker):
                answers, answered = await scrape_services(broker.connection, SERVICE_NAMES)
            for name in SERVICE_NAMES:
                metrics.service_up.labels(name).set(1 if name in answered else 0)
            return PlainTextResponse(metrics.render(answers), media_type="text/plain; version=0.0.4")


def allowed_origins(edge: EdgeSettings, port: int) -> list[str]:
    """Origins a browser may call from: any loopback origin (any port) plus configured ones.

    A page on this machine (a browser-based MCP client such as the Inspector on :6274) is as
    trusted as the edge's own origin; pages from any other host are refused.
    """
    own = [f"{scheme}://{host}{port_part}" for scheme in ("http", "https") for host in LOOPBACK
           for port_part in ("", ":*")]
    return own + list(edge.allowed_origins)


def _transport_security(settings: Settings, edge: EdgeSettings, port: int) -> TransportSecuritySettings:
    """DNS-rebinding protection: only our own host names (loopback, the bind address, configured names).

    Bound to every interface with no configured names (a pod behind a Service), the Host check is
    off: the names clients use are not known here. The Origin check (`OriginCheck`) stays on.
    """
    hosts = [f"{h}:{port}" for h in LOOPBACK] + list(LOOPBACK)
    if settings.edge_host not in ("127.0.0.1", "localhost", "0.0.0.0", "::"):
        hosts += [f"{settings.edge_host}:{port}", settings.edge_host]
    hosts += list(edge.allowed_hosts)
    open_bind = settings.edge_host in ("0.0.0.0", "::")
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=not (open_bind and not edge.allowed_hosts),
        allowed_hosts=hosts,
        allowed_origins=allowed_origins(edge, port),
    )


class OriginCheck:
    """Refuse (403) any HTTP request whose Origin header is not an allowed origin.

    Browsers always send Origin on cross-site requests, so a web page cannot drive the edge with
    a user's token; clients that are not browsers send no Origin and are not affected.
    """

    def __init__(self, app: ASGIApp, origins: list[str]) -> None:
        self.app = app
        self.exact = {o.rstrip("/") for o in origins if not o.endswith(":*")}
        self.prefixes = tuple(o[:-1] for o in origins if o.endswith(":*"))  # keeps the trailing ':'

    def allowed(self, origin: str) -> bool:
        origin = origin.rstrip("/")
        if origin in self.exact:
            return True
        # `scheme://host:*` stands for that host on any port: what follows must be a port number only.
        return any(origin.startswith(p) and origin[len(p):].isdigit() for p in self.prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            origin = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"origin"), None)
            if origin is not None and not self.allowed(origin):
                response = JSONResponse(
                    {"error": "origin_not_allowed", "message": f"requests from origin {origin!r} are not allowed"},
                    status_code=403,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


@dataclass
class RunningEdge:
    """The HTTP edge serving in the current event loop."""

    url: str
    broker: NatsBroker
    web: uvicorn.Server
    task: asyncio.Task[None]
    verifier: BusTokenVerifier
    guards: EdgeGuards

    @property
    def base_url(self) -> str:
        return self.url.removesuffix("/mcp")

    async def stop(self) -> None:
        self.web.should_exit = True
        await self.task
        await self.broker.stop()


def build_app(settings: Settings, edge: EdgeSettings, broker: NatsBroker, port: int) -> tuple[ASGIApp, BusTokenVerifier, EdgeGuards]:
    """The whole ASGI application of the HTTP edge (Origin check around the MCP app)."""
    server, verifier, guards = build_http_server(settings, broker, port, edge)
    app = server.streamable_http_app(
        transport_security=_transport_security(settings, edge, port),
        host=settings.edge_host,
        max_request_body_size=edge.max_body_bytes,
    )
    assert verifier.failures is not None  # build_http_server always gives it one
    gated = PeerGate(app, verifier, verifier.failures)
    return OriginCheck(gated, allowed_origins(edge, port)), verifier, guards


async def start_edge(settings: Settings, edge: EdgeSettings | None = None) -> RunningEdge:
    """Connect to the bus and serve MCP over HTTP; returns once the port accepts connections."""
    edge = edge or EdgeSettings()
    broker = make_broker(settings.nats_url or "", credentials=settings_credentials(settings))
    await broker.start()
    port = settings.edge_port or 8765
    app, verifier, guards = build_app(settings, edge, broker, port)
    web = uvicorn.Server(uvicorn.Config(app, host=settings.edge_host, port=port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(web.serve())
    while not web.started:
        if task.done():
            await broker.stop()
            task.result()  # re-raise why it could not start
            raise RuntimeError(f"the edge could not bind {settings.edge_host}:{port}")
        await asyncio.sleep(0.02)
    return RunningEdge(
        url=f"http://{settings.edge_host}:{port}/mcp", broker=broker, web=web, task=task, verifier=verifier,
        guards=guards,
    )


async def serve_http(settings: Settings) -> int:
    setup_tracing("edge")
    edge = await start_edge(settings)
    print(f"echo-memory edge: ready on {edge.url}", flush=True)
    try:
        await edge.task
    finally:
        await edge.broker.stop()
    return 0


async def serve_stdio(settings: Settings, edge: EdgeSettings | None = None, bus: BusAccess | None = None) -> int:
    """Serve MCP on stdin/stdout for the token in ECHO_MEMORY_TOKEN (or --token).

    `bus` is how the starter (the laptop CLI) reaches the bus: its credentials and, for the embedded
    system, what keeps the connection on NATS when `up` moves it; without it, the settings' own
    credentials. Returns 2 (with a message on stderr) when the token is missing, unknown, revoked
    or for an org this process does not serve.
    """
    setup_tracing("edge")
    edge = edge or EdgeSettings()
    if settings.token is None:
        print("echo-memory mcp: set ECHO_MEMORY_TOKEN (or pass --token) to a token from `echo-memory token create`",
              file=sys.stderr)
        return 2
    try:
        bus = bus or BusAccess(credentials=settings_credentials(settings))
    except CredentialsError as exc:
        print(f"echo-memory mcp: {exc}", file=sys.stderr)
        return 2
    broker = make_broker(settings.nats_url or "", credentials=bus.credentials)
    await broker.start()
    follow = bus.follow(broker.connection) if bus.follow is not None else None
    try:
        verifier = BusTokenVerifier(BusClient(broker), settings.timeouts.auth, orgs=_orgs(settings, edge))
        access = await verifier.verify_token(settings.token.get_secret_value())
        if access is None:
            raise Unauthenticated(
                f"the token is unknown, revoked, or not for org '{settings.org}' (set ECHO_MEMORY_ORG)"
            )
        server = build_stdio_server(settings, broker, caller_from_access(access, None), edge)
        await server.run_stdio_async()
    except EchoError as exc:
        print(f"echo-memory mcp: {exc.message}", file=sys.stderr)
        return 2
    finally:
        if follow is not None:
            follow.cancel()
        await _close_bus(broker)
    return 0


async def _close_bus(broker: NatsBroker) -> None:
    """Close the broker; with the bus down (mid-reconnect) draining is impossible, so just close."""
    try:
        await broker.stop()
    except (nats.errors.ConnectionReconnectingError, nats.errors.ConnectionClosedError):
        try:
            await broker.connection.close()
        except (RuntimeError, OSError):
            # nats-py flushes requests made while the bus was down into a socket that is already
            # gone; the connection ends closed either way, and a client leaving must exit quietly.
            pass


def run_edge(settings: Settings) -> int:
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s edge %(levelname)s %(message)s")
    if settings.nats_url is None:
        print("echo-memory edge: ECHO_MEMORY_NATS_URL is not set", file=sys.stderr)
        return 2
    try:
        settings_credentials(settings)
    except CredentialsError as exc:
        print(f"echo-memory edge: {exc}", file=sys.stderr)
        return 2
    try:
        return eventloop.run(serve_http(settings), use_uvloop=settings.uvloop)
    except KeyboardInterrupt:
        return 0


__all__ = ["OriginCheck", "build_app", "build_http_server", "build_stdio_server", "run_edge", "serve_stdio", "start_edge"]
