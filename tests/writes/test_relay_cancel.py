"""The outbox relay's loop ends when it is cancelled, even when the cancel meets a wake-up.

On Python 3.11 `asyncio.wait_for` returns the awaited result when its task is cancelled just as
that result arrives, and the cancel is lost: the relay's loop then runs on, and a process (or a
test session) waiting for its background task never stops.
"""

from __future__ import annotations

import asyncio

from echo_memory.libs.core.config import Settings
from echo_memory.libs.server.bus.broker import make_broker
from echo_memory.libs.server.service.context import ServiceContext
from echo_memory.libs.server.store.pool import OrgDatabases
from echo_memory.services.writes.relay import OutboxRelay

TICKS = 6  # loop iterations between a wake-up and the cancel: the race sits at one of them


async def test_a_cancel_that_meets_a_wake_up_still_stops_the_relay(nats_url: str) -> None:
    settings = Settings(org="relay-cancel", nats_url=nats_url)
    ctx = ServiceContext(name="writes", settings=settings, broker=make_broker(nats_url),
                         databases=OrgDatabases(settings.org, None))
    relay = OutboxRelay(ctx, interval=30)
    for ticks in range(TICKS):
        task = asyncio.create_task(relay.run())
        while relay._js is None:  # connected and waiting for a wake-up
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)
        relay._wake.set()  # as a committed write does, at the moment the process stops
        for _ in range(ticks):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=5)
        assert done, f"a cancel {ticks} loop turns after a wake-up was lost: the relay runs on"
        assert task.cancelled()
