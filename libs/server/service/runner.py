"""Start a service: check the schema, connect, subscribe every route, serve until told to stop."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import nats
import psycopg
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.errors import SchemaTooNew, SchemaTooOld
from echo_memory.libs.server import eventloop
from echo_memory.libs.server.bus.auth import CredentialsError, connect_options, settings_credentials
from echo_memory.libs.server.bus.broker import make_broker, subscriptions_registered
from echo_memory.libs.server.orgs import lookup_org
from echo_memory.libs.server.service.context import ServiceContext
from echo_memory.libs.server.service.health import Health
from echo_memory.libs.server.service.routes import Routes, build_router
from echo_memory.libs.server.store.pool import OrgDatabases
from echo_memory.libs.server.store.schema import check_version, schema_version
from echo_memory.libs.server.telemetry import setup_tracing, tracer_provider
from echo_memory.libs.server.telemetry.metrics import METRICS_SUBJECT

if TYPE_CHECKING:
    from echo_memory.libs.server.embed import MiniLM

log = logging.getLogger(__name__)

RoutesFactory = Callable[[ServiceContext], Routes]

EXIT_SCHEMA = 3


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
        if self.ctx.on_stop is not None:
            await self.ctx.on_stop()
        await self.ctx.databases.close()
        await self.nc.close()


async def start_service(
    name: str, routes: RoutesFactory, settings: Settings, *, embedder: MiniLM | None = None,
    lazy_model: bool = False,
) -> RunningService:
    """Connect, subscribe every route of `name` and start serving in the running event loop."""
    if settings.nats_url is None:
        raise ValueError(f"the {name} service needs ECHO_MEMORY_NATS_URL")
    credentials = settings_credentials(settings)
    nc = await nats.connect(settings.nats_url, max_reconnect_attempts=-1, **connect_options(credentials))

    async def lookup(org: str) -> str | None:
        return await lookup_org(nc, org)

    default_url = settings.database_url.get_secret_value() if settings.database_url else None
    broker = make_broker(settings.nats_url or "", credentials=credentials, tracing=tracer_provider(name))
    ctx = ServiceContext(
        name=name,
        settings=settings,
        broker=broker,
        databases=OrgDatabases(settings.org, default_url, lookup, max_size=settings.db_pool_size),
        embedder=embedder,
        lazy_model=lazy_model,
    )
    broker.include_router(build_router(ctx, routes(ctx)))
    await broker.start()
    await _answer_scrapes(nc, ctx)
    # "ready" must mean a request finds this service: both connections' SUBs are on the server.
    await subscriptions_registered(getattr(broker, "_connection", None))  # FastStream's nats-py client
    await subscriptions_registered(nc)
    background: asyncio.Task[None] | None = None
    if ctx.on_start is not None:
        background = asyncio.create_task(_background(ctx.on_start))
    return RunningService(ctx=ctx, nc=nc, background=background)


async def _answer_scrapes(nc: NATS, ctx: ServiceContext) -> None:
    """Reply to every metrics scrape with this process's exposition text (no queue group: every
    replica answers, and the edge merges them)."""

    async def reply(msg: Msg) -> None:
        if msg.reply:
            await nc.publish(msg.reply, ctx.metrics.scrape_answer())

    await nc.subscribe(METRICS_SUBJECT, cb=reply)


async def _background(start: Callable[[], Awaitable[None]]) -> None:
    await start()


@dataclass(frozen=True)
class Hosted:
    """One service a process runs: its routes, its own settings (its own bus user) and when it needs the model."""

    name: str
    routes: RoutesFactory
    settings: Settings
    model: str = "never"  # "at_start", "on_first_use" or "never" (echo_memory.libs.server.service.registry.ServiceInfo)


def run_service(name: str, routes: RoutesFactory, settings: Settings, *, model: str = "never") -> int:
    """Run one service in the foreground until SIGTERM/SIGINT; returns the process exit code."""
    return run_services([Hosted(name, routes, settings, model)], settings)


def run_services(hosted: list[Hosted], settings: Settings) -> int:
    """Run `hosted` in this one process until SIGTERM/SIGINT; returns the process exit code.

    Several services in one process share the interpreter, the libraries and one embedding model
    (the laptop's default); each still has its own bus connection, user, subscriptions and pools.
    Without a health port (the laptop) a schema that does not fit the code exits with EXIT_SCHEMA, for the
    supervisor to report. With one (Kubernetes) the process waits, not ready with the reason on /readyz,
    and starts as soon as the schema fits (a migration Job or hook brings it there).
    """
    label = "+".join(h.name for h in hosted)
    logging.basicConfig(level=settings.log_level.upper(), format=f"%(asctime)s {label} %(levelname)s %(message)s")
    if settings.nats_url is None:
        print(f"echo-memory {label}: ECHO_MEMORY_NATS_URL is not set", file=sys.stderr)
        return 2
    for one in hosted:
        try:
            settings_credentials(one.settings)
        except CredentialsError as exc:
            print(f"echo-memory {one.name}: {exc}", file=sys.stderr)
            return 2
    if settings.database_url is not None and settings.health_port is None:
        problem = _schema_problem(settings.database_url.get_secret_value())
        if problem is not None:
            print(f"echo-memory {label}: {problem[1]}", file=sys.stderr)
            return problem[0]
    return eventloop.run(_serve(label, hosted, settings), use_uvloop=settings.uvloop)


def _schema_problem(database_url: str) -> tuple[int, str] | None:
    """``(exit code, message)`` when the default org's schema does not fit this code, else None."""
    try:
        check_version(schema_version(database_url))
    except (SchemaTooOld, SchemaTooNew) as exc:
        return EXIT_SCHEMA, exc.message
    except psycopg.OperationalError as exc:
        return 1, f"cannot reach the database: {exc}".strip()
    return None


async def _wait_for_schema(name: str, settings: Settings, health: Health) -> None:
    """Return once the default org's schema fits the code, reporting why not on /readyz meanwhile."""
    assert settings.database_url is not None
    url = settings.database_url.get_secret_value()
    while (problem := await asyncio.to_thread(_schema_problem, url)) is not None:
        if problem[1] != health.reason:
            log.warning("%s waits: %s", name, problem[1])
            print(f"echo-memory {name}: waiting: {problem[1]}", file=sys.stderr, flush=True)
        health.not_ready(problem[1])
        await asyncio.sleep(settings.schema_wait_seconds)


async def _serve(label: str, hosted: list[Hosted], settings: Settings) -> int:
    setup_tracing(label)
    health = Health(label)
    if settings.health_port is not None:
        await health.start(settings.health_port)
    try:
        return await _serve_healthy(label, hosted, settings, health)
    finally:
        await health.stop()


async def _serve_healthy(label: str, hosted: list[Hosted], settings: Settings, health: Health) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if settings.database_url is not None and settings.health_port is not None:
        waiting = asyncio.create_task(_wait_for_schema(label, settings, health))
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({waiting, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            waiting.cancel()
            return 0
        stopped.cancel()
    health.not_ready("loading")
    embedder = None
    if any(h.model == "at_start" for h in hosted):  # only processes hosting a service that embeds load the model
        from echo_memory.libs.server.embed import MiniLM

        embedder = MiniLM()
    running: list[RunningService] = []
    try:
        for one in hosted:
            shared = embedder if one.model != "never" else None  # a loaded model also serves the lazy ones
            running.append(await start_service(one.name, one.routes, one.settings, embedder=shared,
                                               lazy_model=shared is None and one.model == "on_first_use"))
        health.serving(connected=lambda: all(r.nc.is_connected for r in running))
        for one in hosted:
            log.info("%s ready", one.name)
            print(f"echo-memory {one.name}: ready", flush=True)
        await stop.wait()
    finally:
        for service in reversed(running):
            await service.stop()
    return 0
