"""The outbox relay: publish committed outbox rows to JetStream stream ECHO_EVENTS, then mark them.

Writes insert outbox rows in their own transaction, so an event exists exactly when its change
committed. This relay, running inside the writes service, publishes them in id order to
`echo.v1.<org>.events.<kind>` with `Nats-Msg-Id: <org>:<outbox id>`, so a row published twice
(the relay died between publishing and marking) is stored once by JetStream's de-duplication.
It runs right after each write (`kick`) and on a timer (a write whose kick was lost, an org
whose database was down, rows left by another replica). Replicas share the work with
`FOR UPDATE SKIP LOCKED`.

Not here: consumers of the events (reindex, consolidation, audit).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from datetime import timedelta

import nats
from nats.js import JetStreamContext
from nats.js.api import StreamConfig
from nats.js.errors import BadRequestError, NotFoundError

from echo_memory.libs.core.contracts.bus import Event
from echo_memory.libs.core.contracts.subjects import EVENTS_STREAM, PREFIX, event_subject
from echo_memory.libs.server.bus.auth import connect_options, settings_credentials
from echo_memory.libs.server.service.context import ServiceContext
from echo_memory.libs.server.service.errors import as_echo_error

log = logging.getLogger(__name__)

CLAIM_BATCH = """
SELECT id, kind, payload FROM outbox WHERE published_at IS NULL
ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED
"""
MARK_PUBLISHED = "UPDATE outbox SET published_at = now() WHERE id = ANY(%s) AND published_at IS NULL"

STREAM_SUBJECTS = [f"{PREFIX}.*.events.>"]
# Long enough to cover a relay restart between publishing and marking a batch.
DUPLICATE_WINDOW = timedelta(minutes=10).total_seconds()


async def ensure_stream(js: JetStreamContext) -> None:
    """Create ECHO_EVENTS if it does not exist yet (whoever starts first creates it; config kept)."""
    try:
        await js.stream_info(EVENTS_STREAM)
    except NotFoundError:
        try:
            await js.add_stream(
                StreamConfig(name=EVENTS_STREAM, subjects=STREAM_SUBJECTS, duplicate_window=DUPLICATE_WINDOW)
            )
        except BadRequestError:  # created concurrently by another replica
            await js.stream_info(EVENTS_STREAM)


def message_id(org: str, outbox_id: int) -> str:
    """The de-duplication id of an outbox row: outbox ids repeat across orgs, so the org is part of it."""
    return f"{org}:{outbox_id}"


class OutboxRelay:
    """One per writes process; `run()` is its background loop, `kick(org)` wakes it."""

    def __init__(self, ctx: ServiceContext, *, interval: float = 2.0, batch: int = 200) -> None:
        self.ctx = ctx
        self.interval = interval
        self.batch = batch
        self.orgs: set[str] = {ctx.settings.org} if ctx.settings.database_url else set()
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._js: JetStreamContext | None = None

    def kick(self, org: str) -> None:
        """Ask for a pass soon (after a write committed for `org`)."""
        self.orgs.add(org)
        self._wake.set()

    async def run(self) -> None:
        """Publish until cancelled: after every kick, and every `interval` seconds regardless."""
        url = self.ctx.settings.nats_url
        assert url is not None  # the service this relay belongs to connected with it
        credentials = settings_credentials(self.ctx.settings)
        nc = await nats.connect(url, max_reconnect_attempts=-1, **connect_options(credentials))
        try:
            self._js = nc.jetstream()
            await ensure_stream(self._js)
            while True:
                # asyncio.timeout, not wait_for: on Python 3.11 a cancel that meets wait_for's own
                # time-out can come out as TimeoutError, which this loop would swallow forever.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.interval):
                        await self._wake.wait()
                self._wake.clear()
                for org in sorted(self.orgs):
                    await self._pass_logged(org)
        finally:
            self._js = None
            await nc.close()

    async def _pass_logged(self, org: str) -> None:
        try:
            await self.relay_org(org)
        except Exception as exc:  # database down or org unknown: the timer tries again (bugs are logged in full)
            log.warning("outbox relay for org %s: %s", org, as_echo_error(exc, self.ctx.name).message)

    async def relay_org(self, org: str) -> int:
        """Publish every unpublished outbox row of `org`; returns how many were published."""
        if self._js is None:
            return 0
        total = 0
        async with self._lock:
            while True:
                published = await self._one_batch(org, self._js)
                total += published
                if published < self.batch:
                    return total

    async def _one_batch(self, org: str, js: JetStreamContext) -> int:
        failure: Exception | None = None
        done: list[int] = []
        async with self.ctx.databases.transaction(org) as conn:
            rows = await (await conn.execute(CLAIM_BATCH, (self.batch,))).fetchall()
            for outbox_id, kind, payload in rows:
                body = payload if isinstance(payload, dict) else json.loads(payload)
                event = Event(event_id=outbox_id, org=org, kind=kind, payload=body)
                try:
                    await js.publish(
                        event_subject(org, kind),
                        event.model_dump_json().encode(),
                        headers={"Nats-Msg-Id": message_id(org, outbox_id)},
                    )
                except Exception as exc:  # noqa: BLE001 - re-raised below, after marking what got through
                    failure = exc
                    break
                done.append(outbox_id)
            # Mark what reached the stream even when a later publish failed; the rest is retried.
            if done:
                await conn.execute(MARK_PUBLISHED, (done,))
        if failure is not None:
            raise failure
        return len(done)
