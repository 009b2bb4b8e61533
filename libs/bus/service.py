"""What every service process shares: start-up checks, the handler seam, and a clean stop.

A service module provides `build_router(ctx) -> NatsRouter`; its handlers call `ctx.handle(...)`,
which validates the verb's arguments, opens one transaction on the org's database, runs the
store function and turns every failure into a typed `Reply` — nothing escapes as a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import nats
import psycopg
from faststream.nats import NatsBroker, NatsRouter
from nats.aio.client import Client as NATS
from pydantic import BaseModel, ValidationError

from libs import eventloop
from libs.config import Settings
from libs.contracts.bus import Caller, Reply, Request
from libs.contracts.errors import EchoError, Internal, InvalidArgument, SchemaTooNew, SchemaTooOld, Unavailable
from libs.embed import MiniLM
from libs.orgs import lookup_org
from libs.store.pool import OrgDatabases
from libs.store.schema import check_version, schema_version
from libs.telemetry import setup_tracing

log = logging.getLogger(__name__)

ArgsT = TypeVar("ArgsT", bound=BaseModel)
Handler = Callable[[psycopg.AsyncConnection, Caller, ArgsT], Awaitable[BaseModel]]

EXIT_SCHEMA = 3


@dataclass
class ServiceContext:
    """Built once per process and handed to the service's router."""

    name: str
    settings: Settings
    broker: NatsBroker
    databases: OrgDatabases
    embedder: MiniLM | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    async def handle(
        self,
        org: str,
        request: Request,
        model: type[ArgsT],
        fn: Handler[ArgsT],
    ) -> Reply:
        """Validate, run `fn` in one transaction on `org`'s database, and reply typed."""
        try:
            args = parse_args(model, request.args)
            if request.caller.org != org:
                raise InvalidArgument("the caller's org does not match the subject's org")
            async with self.databases.transaction(org) as conn:
                result = await fn(conn, request.caller, args)
            return Reply.success(result)
        except EchoError as exc:
            return Reply.failure(exc)
        except psycopg.OperationalError as exc:
            return Reply.failure(Unavailable(f"the database failed: {type(exc).__name__}"))
        except Exception as exc:  # the seam where a bug becomes a typed error instead of silence
            log.exception("%s: unexpected %s", self.name, type(exc).__name__)
            return Reply.failure(Internal(f"{self.name} failed with {type(exc).__name__}; see the service log"))


def parse_args(model: type[ArgsT], args: dict[str, Any]) -> ArgsT:
    """The verb's arguments as its contract model, or `InvalidArgument` naming every bad field."""
    try:
        return model.model_validate(args)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(part) for part in err["loc"]) or "arguments"
            problems.append(f"{where}: {err['msg']}")
        raise InvalidArgument("invalid arguments: " + "; ".join(problems)) from None


RouterFactory = Callable[[ServiceContext], NatsRouter]


@dataclass(frozen=True)
class Route:
    """One verb of a service: its argument model and the store function that answers it.

    `after(org)` runs once the verb's transaction has committed successfully (e.g. to wake the
    outbox relay).
    """

    verb: str
    model: type[BaseModel]
    fn: Handler[Any]
    after: Callable[[str], None] | None = None


def route_router(ctx: ServiceContext, service: str, routes: list[Route], *, max_workers: int = 1) -> NatsRouter:
    """A router with one queue-group subscriber per route, each answering through `ctx.handle`."""
    from libs.contracts.subjects import queue_group, subscribe_pattern

    router = NatsRouter()
    for route in routes:
        router.subscriber(
            subscribe_pattern(service, route.verb), queue=queue_group(service), max_workers=max_workers
        )(_route_answer(ctx, route))
    return router


def _route_answer(ctx: ServiceContext, route: Route) -> Callable[..., Awaitable[Reply]]:
    from faststream import Path as SubjectParam

    async def answer(request: Request, org: str = SubjectParam()) -> Reply:
        reply = await ctx.handle(org, request, route.model, route.fn)
        if reply.ok and route.after is not None:
            route.after(org)
        return reply

    return answer


def run_service(name: str, build_router: RouterFactory, settings: Settings, *, embedder: bool = False) -> int:
    """Run one service in the foreground until SIGTERM/SIGINT; returns the process exit code."""
    logging.basicConfig(level=settings.log_level.upper(), format=f"%(asctime)s {name} %(levelname)s %(message)s")
    if settings.nats_url is None:
        print(f"echo-memory {name}: ECHO_MEMORY_NATS_URL is not set", file=sys.stderr)
        return 2
    if settings.database_url is not None:
        try:
            check_version(schema_version(settings.database_url.get_secret_value()))
        except (SchemaTooOld, SchemaTooNew) as exc:
            print(f"echo-memory {name}: {exc.message}", file=sys.stderr)
            return EXIT_SCHEMA
        except psycopg.OperationalError as exc:
            print(f"echo-memory {name}: cannot reach the database: {exc}".strip(), file=sys.stderr)
            return 1
    return eventloop.run(_serve(name, build_router, settings, embedder), use_uvloop=settings.uvloop)


@dataclass
class RunningService:
    """A service subscribed and serving; `stop()` unsubscribes and closes its pools."""

    ctx: ServiceContext
    nc: NATS
    background: asyncio.Task[None] | None = None

    async def stop(self) -> None:
        if self.background:
            self.background.cancel()
        await self.ctx.broker.stop()
        await self.ctx.databases.close()
        await self.nc.close()


async def start_service(
    name: str, build_router: RouterFactory, settings: Settings, *, embedder: MiniLM | None = None
) -> RunningService:
    """Connect, subscribe and start serving `name` in the running event loop."""
    from libs.bus.broker import make_broker

    if settings.nats_url is None:  # run_service checks it first; in-process callers must set it too
        raise ValueError(f"echo-memory {name}: settings.nats_url is not set")
    nc = await nats.connect(settings.nats_url, max_reconnect_attempts=-1)

    async def lookup(org: str) -> str | None:
        return await lookup_org(nc, org)

    default_url = settings.database_url.get_secret_value() if settings.database_url else None
    broker = make_broker(settings.nats_url or "")
    ctx = ServiceContext(
        name=name,
        settings=settings,
        broker=broker,
        databases=OrgDatabases(settings.org, default_url, lookup),
        embedder=embedder,
    )
    broker.include_router(build_router(ctx))
    await broker.start()
    on_start = ctx.extra.get("on_start")
    background = asyncio.create_task(on_start()) if on_start else None
    return RunningService(ctx=ctx, nc=nc, background=background)


async def _serve(name: str, build_router: RouterFactory, settings: Settings, embedder: bool) -> int:
    setup_tracing(name)
    running = await start_service(name, build_router, settings, embedder=MiniLM() if embedder else None)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("%s ready", name)
    print(f"echo-memory {name}: ready", flush=True)
    await stop.wait()
    await running.stop()
    return 0


def not_built_router(service: str, verbs: tuple[str, ...], issue: str) -> NatsRouter:
    """Subscribers that answer every verb with a typed `not_built` error (never an empty success)."""
    from libs.contracts.subjects import queue_group, subscribe_pattern

    router = NatsRouter()
    for verb in verbs:
        router.subscriber(subscribe_pattern(service, verb), queue=queue_group(service))(
            _not_built_answer(service, verb, issue)
        )
    return router


def _not_built_answer(service: str, verb: str, issue: str) -> Callable[[Request], Awaitable[Reply]]:
    from libs.contracts.errors import NotBuilt

    async def answer(request: Request) -> Reply:
        return Reply.failure(NotBuilt(f"{verb} is not built yet ({issue}); the {service} service has no implementation"))

    return answer
