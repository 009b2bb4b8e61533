"""Consuming ECHO_EVENTS: one durable pull consumer per purpose, shared by a service's replicas.

The writes service's outbox relay creates the stream; a consumer started before it waits and
binds once it exists. Each message is handed to the caller's handler, which acknowledges it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import nats
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig
from nats.js.errors import NotFoundError

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.subjects import EVENTS_STREAM
from echo_memory.libs.server.bus.auth import connect_options, settings_credentials

STREAM_WAIT = 2.0  # until the writes service has created ECHO_EVENTS, look again this often


async def consume_events(
    settings: Settings, subject: str, durable: str, handle: Callable[[Msg], Awaitable[None]], *,
    batch: int, fetch_wait: float, after_fetch: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Hand every message of `subject` on ECHO_EVENTS, through the durable consumer `durable`, to
    `handle`, until cancelled; `after_fetch`, when given, runs after every fetch, with or without
    messages (at least every `fetch_wait` seconds). Connects as this process's bus user."""
    assert settings.nats_url is not None  # the service this task belongs to connected with it
    nc = await nats.connect(settings.nats_url, max_reconnect_attempts=-1,
                            **connect_options(settings_credentials(settings)))
    try:
        js = nc.jetstream()
        while True:
            try:
                sub = await js.pull_subscribe(subject, durable=durable, stream=EVENTS_STREAM,
                                              config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT))
                break
            except NotFoundError:  # no stream yet: the writes service has not started
                await asyncio.sleep(STREAM_WAIT)
        while True:
            with contextlib.suppress(NatsTimeout, TimeoutError):
                for msg in await sub.fetch(batch, timeout=fetch_wait):
                    await handle(msg)
            if after_fetch is not None:
                await after_fetch()
    finally:
        await nc.close()


__all__ = ["STREAM_WAIT", "consume_events"]
