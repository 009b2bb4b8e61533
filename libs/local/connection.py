"""How the laptop tool (CLI commands, eval, benchmark) finds the running system and talks to it over
the bus, as the org's admin.

Every bus interaction of the CLI is bounded: connecting gives up within CONNECT_BOUND_SECONDS with
`BusUnreachable`, and each request waits at most its verb's time-out class (libs/core/contracts/verbs.py).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import nats.errors
from faststream.nats import NatsBroker

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.errors import EchoError, Unavailable
from echo_memory.libs.core.contracts.identity import ADMIN_AGENT, admin_caller
from echo_memory.libs.core.contracts.verbs import In, Out, Verb
from echo_memory.libs.local.supervisor.bus_auth import process_credentials
from echo_memory.libs.local.supervisor.state import read_state
from echo_memory.libs.server import eventloop
from echo_memory.libs.server.bus.auth import CredentialsError
from echo_memory.libs.server.bus.broker import make_broker, stop_broker
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.libs.server.bus.permissions import ADMIN_USER

__all__ = ["ADMIN_AGENT", "BusRefused", "BusUnreachable", "NotRunning", "admin_call", "admin_command", "bus_session", "connect_bus", "nats_url", "verb_timeout"]

# Two connect attempts of at most 2 s each (libs/server/bus/broker.py) fit; this also bounds a server that
# accepts the TCP connection and never speaks NATS.
CONNECT_BOUND_SECONDS = 6.0
START_HINT = "start it with `echo-memory up`"


class NotRunning(Unavailable):
    """No NATS URL configured and no running embedded system found."""


class BusUnreachable(Unavailable):
    """The NATS URL is known but nothing answers there within CONNECT_BOUND_SECONDS."""


class BusRefused(Unavailable):
    """The bus answered but refused this process's credentials (or it has none for an authenticated bus)."""


def nats_url(settings: Settings) -> str:
    """The configured NATS URL, else the running embedded system's; NotRunning when there is neither."""
    if settings.nats_url:
        return settings.nats_url
    state = read_state(settings.home.expanduser())
    if state is None or not state.nats_url:
        raise NotRunning(
            f"Echo Memory is not running for data directory {settings.home}; {START_HINT}"
        )
    return state.nats_url


def verb_timeout(settings: Settings, verb: Verb[Any, Any]) -> float:
    """Seconds one request of `verb` may take: its time-out class from the verb table, in settings.timeouts."""
    seconds: float = getattr(settings.timeouts, verb.timeout)
    return seconds


def _shown(url: str) -> str:
    # A NATS URL may carry user:password; the sentence names only where it points.
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}:{parts.port}" if parts.hostname and parts.port else url


async def connect_bus(settings: Settings) -> NatsBroker:
    """A broker connected to the system's NATS; the caller stops it.

    Raises NotRunning when no NATS URL is known, BusUnreachable when nothing answers at it within
    CONNECT_BOUND_SECONDS (a sentence naming `echo-memory up`). A connection lost later is retried
    once, then requests fail with `unavailable` instead of waiting for NATS to come back.
    """
    url = nats_url(settings)
    try:
        credentials = process_credentials(settings, ADMIN_USER, url)
    except CredentialsError as exc:
        raise BusRefused(f"{exc}; the admin credentials are written by `echo-memory up`") from exc
    broker = make_broker(url, credentials=credentials, reconnect_forever=False)
    try:
        async with asyncio.timeout(CONNECT_BOUND_SECONDS):
            await broker.start()
    except nats.errors.Error as exc:
        _raise_if_interrupted(exc)
        if "authorization" in str(exc).lower():
            raise BusRefused(
                f"the message bus (NATS) at {_shown(url)} refused this command's credentials; run it as the "
                "user that ran `echo-memory up`, or set ECHO_MEMORY_NATS_CREDENTIALS to the admin credentials file"
            ) from exc
        raise BusUnreachable(
            f"the message bus (NATS) at {_shown(url)} cannot be reached; is Echo Memory running? {START_HINT}"
        ) from exc
    except (TimeoutError, OSError) as exc:
        _raise_if_interrupted(exc)
        raise BusUnreachable(
            f"the message bus (NATS) at {_shown(url)} cannot be reached; is Echo Memory running? {START_HINT}"
        ) from exc
    return broker


def _raise_if_interrupted(exc: BaseException) -> None:
    """KeyboardInterrupt when Ctrl-C cancelled the command while it was connecting.

    asyncio turns Ctrl-C into a cancellation of the main task; should the connect attempt end with
    an error of its own while that cancellation is pending, it must not read as "the bus is down".
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling() > 0:
        raise KeyboardInterrupt from exc


@asynccontextmanager
async def bus_session(settings: Settings) -> AsyncIterator[NatsBroker]:
    """`connect_bus` for one command, stopped on exit; raises what `connect_bus` raises."""
    broker = await connect_bus(settings)
    try:
        yield broker
    finally:
        await stop_broker(broker)


async def admin_call(settings: Settings, verb: Verb[In, Out], args: In, timeout: float | None = None) -> Out:
    """`verb`'s result for `args`, asked as the org's admin identity (the CLI on the host that runs the bus).

    `timeout` defaults to the verb's time-out class. Raises NotRunning or BusUnreachable (see
    `bus_session`) and every EchoError of `BusClient.call`.
    """
    async with bus_session(settings) as broker:
        return await BusClient(broker).call(
            verb, args, caller=admin_caller(settings.org), timeout=timeout or verb_timeout(settings, verb)
        )


def admin_command(
    settings: Settings, verb: Verb[In, Out], args: In, command: str, timeout: float | None = None
) -> Out | None:
    """A CLI command's one admin request, run to completion: `verb`'s result, or None once its typed
    error (the system not running, the bus unreachable, the service refusing) is on stderr as
    `echo-memory <command>: <code>: <message>`.
    """
    try:
        return eventloop.run(admin_call(settings, verb, args, timeout), use_uvloop=settings.uvloop)
    except EchoError as exc:
        print(f"echo-memory {command}: {exc.code}: {exc.message}", file=sys.stderr)
        return None
