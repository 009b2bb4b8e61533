"""FastStream NATS brokers, built the same way everywhere (tracing on, message logging off)."""

from __future__ import annotations

import asyncio
from typing import Any

from faststream.nats import NatsBroker
from faststream.nats.security import NatsUserPassword
from nats.aio.client import Client as NATS
from opentelemetry.trace import TracerProvider

from echo_memory.libs.server.bus.auth import NatsCredentials
from echo_memory.libs.server.telemetry import bus_middleware

# A short-lived caller (the CLI) gives up after one retry half a second apart, each attempt bounded
# by this many seconds: nats-py only stops retrying a server when max_reconnect_attempts is > 0.
BOUNDED_CONNECT_SECONDS = 2
BOUNDED_RECONNECT_WAIT_SECONDS = 0.5


def make_broker(
    nats_url: str, *, credentials: NatsCredentials | None = None, reconnect_forever: bool = True,
    tracing: TracerProvider | None = None,
) -> NatsBroker:
    """A broker for `nats_url`, not yet connected, authenticating with `credentials` when given.

    Its message spans come from `tracing` (a service's own provider), else the process's global one.

    Services and the edge keep the default: they retry connecting and reconnecting without limit,
    since NATS coming back later is their normal case. `reconnect_forever=False` is for a command
    that should fail fast: connecting then ends with `nats.errors.NoServersError` after two
    attempts of at most BOUNDED_CONNECT_SECONDS each.
    """
    # logger=None: the broker would otherwise log every message at INFO, payloads included.
    auth: dict[str, Any] = {}
    if credentials is not None:
        auth = {
            "security": NatsUserPassword(credentials.user, credentials.password.get_secret_value()),
            "inbox_prefix": credentials.inbox_prefix,
        }
    if reconnect_forever:
        return NatsBroker(nats_url, middlewares=[bus_middleware(tracing)], logger=None, max_reconnect_attempts=-1, **auth)
    return NatsBroker(
        nats_url, middlewares=[bus_middleware(tracing)], logger=None, max_reconnect_attempts=1, **auth,
        connect_timeout=BOUNDED_CONNECT_SECONDS,
        reconnect_time_wait=BOUNDED_RECONNECT_WAIT_SECONDS,  # type: ignore[arg-type]
    )


async def stop_broker(broker: NatsBroker, *, settle_seconds: float = 6.0) -> None:
    """Stop a broker of `make_broker(reconnect_forever=False)`, also when its connection is down.

    nats-py refuses to drain a connection that is reconnecting or closed. A bounded broker's
    reconnect ends within seconds, connected again (then it is drained as usual) or closed by
    nats-py itself (then nothing is left to stop); this waits up to `settle_seconds` for that.
    """
    connection = getattr(broker, "_connection", None)  # FastStream's handle on the nats-py client
    waited = 0.0
    while connection is not None and connection.is_reconnecting and waited < settle_seconds:
        await asyncio.sleep(0.05)
        waited += 0.05
    if connection is not None and connection.is_closed:
        return
    await broker.stop()


async def subscriptions_registered(connection: NATS | None, timeout: int = 10) -> None:
    """Return once the server holds every subscription `connection` has sent so far.

    One `flush()` is not enough: nats-py writes its PING straight to the socket while a new SUB
    still waits for the flusher task, so the PONG can come back before the server has read the
    SUB, and a request from another connection then finds no responder. The first round trip lets
    the flusher write the SUB; the second one's PING follows it. A closed or reconnecting
    connection returns at once (it re-sends its subscriptions when it is back), as does None (a
    broker that never connected).
    """
    for _ in range(2):
        if connection is None or not connection.is_connected:
            return
        await connection.flush(timeout=timeout)
