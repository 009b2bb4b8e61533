"""Routes: each verb of a service is a `Route`, and every route answers through the same seam.

A route's handler gets the verb's arguments already validated as its contract model and a
`RequestContext` whose connection is inside one transaction (unless its route asks for autocommit);
what it returns is the verb's result, what it raises becomes a typed error
(libs/server/service/errors.py). One subscriber per verb, in the service's queue group, handling
`settings.workers.<service>` requests at once.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic

import psycopg
from faststream import Path as SubjectParam
from faststream.nats import NatsRouter
from pydantic import BaseModel

from echo_memory.libs.core.contracts.bus import Caller, Reply, Request
from echo_memory.libs.core.contracts.errors import EchoError, Internal, InvalidArgument
from echo_memory.libs.core.contracts.parsing import parse_args
from echo_memory.libs.core.contracts.subjects import queue_group, subscribe_pattern
from echo_memory.libs.core.contracts.verbs import In, Out, Verb, verbs_of
from echo_memory.libs.server.service.context import RequestContext, ServiceContext
from echo_memory.libs.server.service.errors import as_echo_error
from echo_memory.libs.server.telemetry import serving_as, steps, tracer_provider

Handler = Callable[[RequestContext, In], Awaitable[Out]]
StoreFunction = Callable[[psycopg.AsyncConnection, Caller, In], Awaitable[Out]]

# NATS's default max_payload; the connected server's own limit is used once known.
DEFAULT_MAX_PAYLOAD = 1_048_576


class RouteEntry:
    """A route whatever its verb's models: what the runtime reads, and the element of a route table.

    Deliberately not generic: in a `list[Route[Any, Any]]` mypy infers `Any` for each `Route(...)` and
    stops checking the handler against its verb; a non-generic element type leaves that check on.
    """

    verb: Verb[Any, Any]
    handler: Handler[Any, Any]
    after: Callable[[str], None] | None
    observe: Callable[[Caller, Any, EchoError | None], None] | None
    transaction: bool


@dataclass(frozen=True)
class Route(RouteEntry, Generic[In, Out]):
    """One verb constant and the handler that answers it, typed alike so mypy checks the pair.

    `after(org)` runs once the verb's transaction has committed (e.g. to wake the outbox relay).
    `observe(caller, result, error)` runs once the request is answered: with the committed result,
    or with the typed error it was refused with (for the service's own metrics).
    `transaction=False` gives the handler a connection in autocommit instead of one transaction:
    for a verb that only reads there while it waits on work elsewhere, and writes nothing on it.
    """

    verb: Verb[In, Out]
    handler: Handler[In, Out]
    after: Callable[[str], None] | None = None
    observe: Callable[[Caller, Out | None, EchoError | None], None] | None = None
    transaction: bool = True


# A service's route table.
Routes = list[RouteEntry]


def on_connection(fn: StoreFunction[In, Out]) -> Handler[In, Out]:
    """A handler for a store function that needs only the transaction's connection and the caller."""

    @functools.wraps(fn)
    async def handler(rc: RequestContext, args: In) -> Out:
        return await fn(rc.conn, rc.caller, args)

    return handler


def build_router(ctx: ServiceContext, routes: Routes) -> NatsRouter:
    """One queue-group subscriber per route; raises ValueError if the routes and the verb table disagree."""
    check_routes(ctx.name, routes)
    workers = ctx.settings.workers.of(ctx.name)
    router = NatsRouter()
    for route in routes:
        router.subscriber(
            subscribe_pattern(ctx.name, route.verb.name), queue=queue_group(ctx.name), max_workers=workers
        )(_subscriber(ctx, route))
    return router


def check_routes(service: str, routes: Routes) -> None:
    """Every verb the table lists for `service` has exactly one route, and no route is unlisted.

    A route counts as listed only when its verb is the table's own constant for `service`: a verb of
    another service, or a look-alike with other models, is refused. Raises ValueError naming each mismatch.
    """
    declared = verbs_of(service)
    given = [r.verb.name for r in routes]
    missing = sorted({v.name for v in declared} - set(given))
    unlisted = sorted(r.verb.name for r in routes if not any(r.verb == v for v in declared))
    doubled = sorted({name for name in given if given.count(name) > 1})
    if missing or unlisted or doubled:
        raise ValueError(
            f"the {service} service's routes do not match libs/core/contracts/verbs.py: "
            f"missing {missing}, not in the table {unlisted}, routed twice {doubled}"
        )


def _subscriber(ctx: ServiceContext, route: RouteEntry) -> Callable[..., Awaitable[bytes]]:
    tracing = tracer_provider(ctx.name)
    spec = route.verb

    async def subscriber(request: Request, org: str = SubjectParam()) -> bytes:
        with serving_as(tracing):  # SQL spans name this service, also in a process hosting several
            reply = await answer(ctx, route, org, request)
        return encode_reply(reply, _max_payload(ctx), ctx.name, spec.name)

    subscriber.__name__ = f"on_{spec.name}"
    return subscriber


async def answer(ctx: ServiceContext, route: RouteEntry, org: str, request: Request) -> Reply:
    """Validate, run the handler in one transaction on `org`'s database, reply typed, and count it."""
    spec = route.verb
    started = time.perf_counter()
    with ctx.metrics.in_flight.labels(ctx.name, spec.name).track_inprogress():
        result, error = await _answer(ctx, route, org, request)
    ctx.metrics.observe_verb(spec.name, error.code if error else "ok", time.perf_counter() - started)
    if route.observe is not None:
        route.observe(request.caller, result, error)
    if error is not None:
        return Reply.failure(error)
    assert result is not None
    return Reply.success(result)


async def _answer(
    ctx: ServiceContext, route: RouteEntry, org: str, request: Request
) -> tuple[BaseModel | None, EchoError | None]:
    spec = route.verb
    try:
        with steps.request(spec.name):
            with steps.step("validate_args"):
                args = parse_args(spec.input, request.args)
            if request.caller.org != org:
                raise InvalidArgument("the caller's org does not match the subject's org")
            connect = ctx.databases.transaction if route.transaction else ctx.databases.autocommit
            async with connect(org) as conn:
                with steps.step("handler"):
                    result = await route.handler(RequestContext(org, request.caller, conn, ctx), args)
                if not isinstance(result, spec.output):  # inside the transaction: a wrong answer commits nothing
                    raise Internal(f"{spec.name} answered {type(result).__name__}, not {spec.output.__name__}")
    except Exception as exc:  # the seam: every failure becomes a typed error, nothing escapes
        return None, as_echo_error(exc, ctx.name)
    if route.after is not None:
        route.after(org)
    return result, None


def encode_reply(reply: Reply, max_payload: int, service: str, verb_name: str) -> bytes:
    """The reply as JSON; a result too large for the bus becomes a typed error instead of silence."""
    body = reply.model_dump_json().encode()
    if len(body) <= max_payload:
        return body
    error: EchoError = Internal(
        f"the {service} service's answer to {verb_name} is {len(body):,} bytes, over the bus limit of "
        f"{max_payload:,}; ask for less (a smaller page or fewer results)"
    )
    return Reply.failure(error).model_dump_json().encode()


def _max_payload(ctx: ServiceContext) -> int:
    # Not connected yet, or a connection that is not nats-py's (FastStream's in-memory test broker):
    # the protocol default.
    try:
        value = ctx.broker.connection.max_payload
    except Exception:
        return DEFAULT_MAX_PAYLOAD
    return value if isinstance(value, int) and value > 0 else DEFAULT_MAX_PAYLOAD
