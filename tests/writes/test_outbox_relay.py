"""The outbox relay: committed events reach JetStream ECHO_EVENTS once, after a write and on the timer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import nats
import pytest
from nats.js import JetStreamContext

from echo_memory.libs.core.contracts.bus import Event
from echo_memory.libs.core.contracts.subjects import EVENTS_STREAM
from echo_memory.libs.testing import EchoStack
from echo_memory.services.writes.relay import OutboxRelay
from tests.writes.conftest import PAYMENTS, Bus, call, sql


@pytest.fixture
async def js(nats_url: str) -> AsyncIterator[JetStreamContext]:
    nc = await nats.connect(nats_url)
    try:
        yield nc.jetstream()
    finally:
        await nc.close()


async def _published(url: str, expected: int, timeout: float = 8) -> None:
    async def done() -> bool:
        rows = await sql(url, "SELECT count(*) FILTER (WHERE published_at IS NOT NULL), count(*) FROM outbox")
        return rows[0] == (expected, expected)

    for _ in range(int(timeout / 0.05)):
        if await done():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(await sql(url, "SELECT id, kind, published_at FROM outbox"))


async def _stored_count(js: JetStreamContext, org: str) -> int:
    info = await js.stream_info(EVENTS_STREAM, subjects_filter=f"echo.v1.{org}.events.>")
    return sum((info.state.subjects or {}).values())


async def test_a_write_event_arrives_on_jetstream_with_the_outbox_id(stack: EchoStack, js: JetStreamContext) -> None:
    async with stack.client(stack.issue_token("claude-code")) as client:
        _, written = await call(client, "write_episode", PAYMENTS)
    await _published(stack.database_url, 1)
    [(outbox_id,)] = await sql(stack.database_url, "SELECT id FROM outbox")
    sub = await js.subscribe(f"echo.v1.{stack.org}.events.>", ordered_consumer=True)
    try:
        message = await sub.next_msg(timeout=5)
    finally:
        await sub.unsubscribe()
    assert message.subject == f"echo.v1.{stack.org}.events.fact.created"
    assert message.headers is not None and message.headers["Nats-Msg-Id"] == f"{stack.org}:{outbox_id}"
    event = Event.model_validate(json.loads(message.data))
    assert (event.event_id, event.org, event.kind) == (outbox_id, stack.org, "fact.created")
    assert event.payload["fact_id"] == written["edges_created"][0]["fact_id"]


async def test_republishing_after_a_lost_mark_is_deduplicated(stack: EchoStack, bus: Bus, js: JetStreamContext) -> None:
    await bus.write(PAYMENTS)
    await bus.write({**PAYMENTS, "facts": [{**PAYMENTS["facts"][0], "fact": "Payments go through Stripe now."}]})
    await _published(stack.database_url, 2)
    assert await _stored_count(js, stack.org) == 2
    # As if the relay died after publishing but before marking: everything is sent again.
    await sql(stack.database_url, "UPDATE outbox SET published_at = NULL")
    relay: OutboxRelay = stack.running["writes"].ctx.extra["relay"]
    assert await relay.relay_org(stack.org) == 2
    assert await _stored_count(js, stack.org) == 2  # JetStream kept one copy of each
    await _published(stack.database_url, 2)


async def test_rows_nobody_kicked_for_are_published_by_the_timer(stack: EchoStack, js: JetStreamContext) -> None:
    # The service's org is known from its settings; a row committed without a kick (another
    # process, a lost wake-up) still goes out within the timer interval.
    await sql(stack.database_url, "INSERT INTO outbox (kind, payload) VALUES ('fact.created', %s)",
              (json.dumps({"org": stack.org, "fact_id": "00000000-0000-0000-0000-000000000009"}),))
    await _published(stack.database_url, 1, timeout=6)
    assert await _stored_count(js, stack.org) == 1
