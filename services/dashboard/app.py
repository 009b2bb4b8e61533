"""The dashboard process: a page and a small JSON API on 127.0.0.1, every answer from one bus verb.

It holds no database connection. It calls the audit service's dashboard verbs (graph, entity
facts, recall cost), `why`, retrieval's `query_memory` for the search box, and the health seam
(services/dashboard/health.py), as the org's admin identity: like the CLI, it is the operator's
own view on the machine that runs the bus; the scope filter narrows what it shows. The page and
its script are package data; nothing is fetched from anywhere else.
"""

from __future__ import annotations

import asyncio
import webbrowser
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import uvicorn
from faststream.nats import NatsBroker
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.core.contracts.identity import admin_caller
from echo_memory.libs.core.contracts.parsing import parse_args
from echo_memory.libs.core.contracts.verbs import (
    DASHBOARD_GRAPH,
    ENTITY_FACTS,
    QUERY_MEMORY,
    RECALL_COST,
    WHY,
    In,
    Out,
    Verb,
)
from echo_memory.libs.server.bus.broker import make_broker, stop_broker
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.services.dashboard import access
from echo_memory.services.dashboard.health import NOT_AVAILABLE, health_summary

STATIC = {"app.js": "text/javascript", "app.css": "text/css", "index.html": "text/html"}
# The page runs only our own script and style and talks only to us.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
STATUS = {"invalid_argument": 400, "not_found": 404, "scope_denied": 403, "unauthenticated": 401,
          "unavailable": 503, "bus_timeout": 504}
FILTERS = ("agent", "project", "since", "until", "as_of")
SEARCH_TOP_K = 25


@cache
def static_file(name: str) -> bytes:
    return resources.files("echo_memory.services.dashboard").joinpath("static", name).read_bytes()


def _headers(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**SECURITY_HEADERS, **(extra or {})}


async def call_json(bus: BusClient, settings: Settings, verb: Verb[In, Out], args: dict[str, Any]) -> dict[str, Any]:
    """`verb`'s result as the page reads it (JSON), asked as the org's admin within the verb's time-out.

    `args` come from a request's query or an earlier answer, so they are checked here against the
    verb's model: InvalidArgument names each bad field, as the service would. Raises the typed
    errors of `BusClient.call`.
    """
    timeout = float(getattr(settings.timeouts, verb.timeout))
    result = await bus.call(verb, parse_args(verb.input, args), caller=admin_caller(settings.org), timeout=timeout)
    return result.model_dump(mode="json")


class Api:
    """The JSON endpoints; each one is one bus call (search and health at most two)."""

    def __init__(self, settings: Settings, bus: BusClient, secret: str) -> None:
        self.settings = settings
        self.bus = bus
        self.secret = secret
        self.caller = admin_caller(settings.org)

    async def call(self, verb: Verb[Any, Any], args: dict[str, Any]) -> dict[str, Any]:
        return await call_json(self.bus, self.settings, verb, args)

    def routes(self) -> list[Route]:
        return [
            Route("/", self.page, methods=["GET"]),
            *(Route(f"/static/{name}", self.asset, methods=["GET"]) for name in STATIC if name != "index.html"),
            Route("/api/session", self.session, methods=["POST"]),
            Route("/api/graph", self.guarded(self.graph), methods=["GET"]),
            Route("/api/entity/{entity_id}", self.guarded(self.entity), methods=["GET"]),
            Route("/api/why/{fact_id}", self.guarded(self.why), methods=["GET"]),
            Route("/api/search", self.guarded(self.search), methods=["GET"]),
            Route("/api/recall-cost", self.guarded(self.recall_cost), methods=["GET"]),
            Route("/api/health", self.guarded(self.health), methods=["GET"]),
        ]

    async def page(self, request: Request) -> Response:
        # The page holds no memory: it is the same for everyone, and asks for data once it has the cookie.
        return Response(static_file("index.html"), media_type="text/html", headers=_headers())

    async def asset(self, request: Request) -> Response:
        name = request.url.path.rsplit("/", 1)[-1]
        return Response(static_file(name), media_type=STATIC[name], headers=_headers())

    async def session(self, request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            body = None
        token = body.get("token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not access.same_secret(token, self.secret):
            return access.denied(401, "unauthenticated", "that is not this dashboard's secret; open the URL it printed")
        response = Response(status_code=204, headers=_headers())
        access.session_cookie(response, self.secret)
        return response

    def guarded(self, endpoint: Any) -> Any:
        async def run(request: Request) -> Response:
            if not access.holds_secret(request, self.secret):
                return access.denied(401, "unauthenticated", "open the URL `echo-memory dashboard` printed")
            try:
                body = await endpoint(request)
            except EchoError as exc:
                return JSONResponse({"code": exc.code, "message": exc.message, "retryable": exc.retryable},
                                    status_code=STATUS.get(exc.code, 500), headers=_headers())
            return JSONResponse(body, headers=_headers())

        return run

    async def graph(self, request: Request) -> dict[str, Any]:
        args = _filters(request)
        if request.query_params.get("cluster"):
            args["cluster"] = request.query_params["cluster"]
        if request.query_params.get("detail_edges"):
            args["detail_edges"] = _int(request.query_params["detail_edges"])
        return await self.call(DASHBOARD_GRAPH, args)

    async def entity(self, request: Request) -> dict[str, Any]:
        return await self.call(ENTITY_FACTS, {**_filters(request), "entity_id": request.path_params["entity_id"]})

    async def why(self, request: Request) -> dict[str, Any]:
        return await self.call(WHY, {"fact_id": request.path_params["fact_id"]})

    async def search(self, request: Request) -> dict[str, Any]:
        params = request.query_params
        # The page sends the scopes it shows; with none, query_memory reads `shared`, its default.
        scopes = [s for s in params.getlist("scope") if s]
        args: dict[str, Any] = {"query": params.get("q", ""), "top_k": SEARCH_TOP_K, "include_episodes": False,
                                **({"scope": scopes} if scopes else {})}
        if params.get("as_of"):
            args["as_of"] = params["as_of"]
        return await self.call(QUERY_MEMORY, args)

    async def recall_cost(self, request: Request) -> dict[str, Any]:
        args = {k: v for k, v in _filters(request).items() if k in ("scope", "agent", "since", "until", "include_demo")}
        return await self.call(RECALL_COST, args)

    async def health(self, request: Request) -> dict[str, Any]:
        scope = request.query_params.get("scope") or None
        result = await health_summary(self.bus, self.caller, self.settings, scope)
        if result is None:
            return {"available": False, "message": NOT_AVAILABLE}
        return {"available": True, "health": result.model_dump(mode="json")}


def _filters(request: Request) -> dict[str, Any]:
    """The filter query parameters as verb arguments (absent and empty ones left out)."""
    params = request.query_params
    out: dict[str, Any] = {k: params[k] for k in FILTERS if params.get(k)}
    scopes = [s for s in params.getlist("scope") if s]
    if scopes:
        out["scope"] = scopes
    if params.get("include_demo") in ("1", "true"):
        out["include_demo"] = True
    return out


def _int(value: str) -> int | str:
    # A non-number goes to the verb as it is, whose model refuses it with a typed error.
    return int(value) if value.isdigit() else value


def build_app(settings: Settings, broker: NatsBroker, secret: str, port: int) -> Any:
    """The ASGI app: the loopback guard around the page and API routes."""
    api = Api(settings, BusClient(broker), secret)
    return access.LoopbackGuard(Starlette(routes=api.routes()), port)


@dataclass
class RunningDashboard:
    port: int
    secret: str
    broker: NatsBroker
    web: uvicorn.Server
    task: asyncio.Task[None]

    @property
    def base_url(self) -> str:
        return f"http://{access.LOOPBACK_HOST}:{self.port}"

    @property
    def open_url(self) -> str:
        """What the user opens: the secret rides in the fragment, which the browser never sends."""
        return f"{self.base_url}/#token={self.secret}"

    async def stop(self) -> None:
        self.web.should_exit = True
        await self.task
        await stop_broker(self.broker)


async def start_dashboard(settings: Settings, broker: NatsBroker, port: int) -> RunningDashboard:
    """Serve on 127.0.0.1:`port` with a fresh secret; returns once the port accepts connections.

    `broker` is already connected; `stop()` stops it. Raises OSError (or what uvicorn raises)
    when the port cannot be bound.
    """
    secret = access.new_secret()
    app = build_app(settings, broker, secret, port)
    web = uvicorn.Server(uvicorn.Config(app, host=access.LOOPBACK_HOST, port=port, log_level="warning",
                                        lifespan="off", access_log=False))
    task = asyncio.create_task(web.serve())
    while not web.started:
        if task.done():
            task.result()  # re-raise why it could not start
            raise OSError(f"the dashboard could not bind {access.LOOPBACK_HOST}:{port}")
        await asyncio.sleep(0.02)
    return RunningDashboard(port=port, secret=secret, broker=broker, web=web, task=task)


async def serve(settings: Settings, broker: NatsBroker, port: int, open_browser: bool) -> int:
    """Run until interrupted: print the URL (and open it with `open_browser`)."""
    running = await start_dashboard(settings, broker, port)
    print(f"echo-memory dashboard: open {running.open_url}", flush=True)
    print("  (the part after # is this run's secret; it changes at every start. Ctrl-C stops.)", flush=True)
    if open_browser:
        webbrowser.open(running.open_url)
    try:
        await running.task
    finally:
        await stop_broker(broker)
    return 0


__all__ = ["RunningDashboard", "build_app", "make_broker", "serve", "start_dashboard"]
