"""Keeps the AGE graph mirror (graph_mirror.py) in sync from the fact events on JetStream ECHO_EVENTS.

One durable pull consumer, `graph-mirror`, shared by every reindex replica (each event reaches one
of them). For `fact.created` the new version is mirrored; for `fact.superseded` the new one and the
version it ended (whose valid_until is now set). Each event is applied in one transaction of its
org's database and acknowledged after commit; an org without AGE acknowledges at once. A retryable
failure (the database is down) is logged and the event redelivered after a delay, so the mirror
catches up instead of losing it; a permanent one (an org no longer served) is logged and dropped.
Mirroring is idempotent, so a redelivery changes nothing.
"""

from __future__ import annotations

import logging

from nats.aio.msg import Msg
from pydantic import ValidationError

from echo_memory.libs.core.contracts.bus import Event
from echo_memory.libs.core.contracts.subjects import GRAPH_MIRROR_CONSUMER, PREFIX
from echo_memory.libs.server.bus.events import consume_events
from echo_memory.libs.server.service.context import ServiceContext
from echo_memory.libs.server.service.errors import as_echo_error
from echo_memory.services.reindex.graph_mirror import mirror_facts

log = logging.getLogger(__name__)

DURABLE = GRAPH_MIRROR_CONSUMER
FACT_EVENTS = f"{PREFIX}.*.events.fact.>"
BATCH = 50
FETCH_WAIT = 2.0  # seconds a fetch waits for events before the loop looks again
REDELIVER_DELAY = 5.0  # seconds before a failed event is tried again


def fact_ids(event: Event) -> list[str]:
    """The fact versions an event touched: the new one, and for a supersession the one it ended."""
    ids = [str(event.payload["fact_id"])]
    if event.payload.get("supersedes"):
        ids.append(str(event.payload["supersedes"]))
    return ids


class GraphMirrorConsumer:
    """The reindex service's background task (`run`); `applied` counts events mirrored or acknowledged."""

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.applied = 0

    async def run(self) -> None:
        await consume_events(self.ctx.settings, FACT_EVENTS, DURABLE, self._handle, batch=BATCH,
                             fetch_wait=FETCH_WAIT)

    async def _handle(self, msg: Msg) -> None:
        try:
            event = Event.model_validate_json(msg.data)
            ids = fact_ids(event)
        except (ValidationError, KeyError) as exc:  # not a fact event this code understands: never retried
            log.warning("graph mirror: dropping malformed event on %s: %s", msg.subject, exc)
            await msg.term()
            return
        try:
            async with self.ctx.databases.transaction(event.org) as conn:
                await mirror_facts(conn, ids)
        except Exception as exc:  # noqa: BLE001 - typed below: retried when retryable, else dropped and logged
            error = as_echo_error(exc, self.ctx.name)
            if error.retryable:  # the database is down: redelivered later, so the mirror catches up
                log.warning("graph mirror for org %s, event %s (retrying): %s", event.org, event.event_id,
                            error.message)
                await msg.nak(delay=REDELIVER_DELAY)
            else:  # an org this deployment no longer serves: retrying cannot help; reindex rebuilds
                log.warning("graph mirror for org %s, event %s (dropped; `echo-memory reindex` rebuilds): %s",
                            event.org, event.event_id, error.message)
                await msg.term()
            return
        await msg.ack()
        self.applied += 1
