"""Consolidation running by itself: after a scope's facts change, and on a sweep of every scope.

The service's background task (`run`). A durable pull consumer of ECHO_EVENTS, `consolidation`,
shared by every replica, marks the scope of each fact event dirty and acknowledges it at once:
losing one costs nothing, the sweep covers it. A dirty scope runs once it has been quiet for
`debounce_seconds` (or after `max_wait_seconds` of steady writes), and every scope of every org
seen runs every `sweep_minutes`. Never on the write path: a write only adds an outbox row.

Replicas cooperate through a lease: each run takes a transaction-scoped advisory lock of its own
(not the scope's write lock, so no write waits) with `pg_try_advisory_xact_lock`; a replica that
finds it taken skips the scope, counted as `skipped`. Runs are idempotent, so a scope run twice in
a row changes nothing the second time. Runs go to the service's run process (worker.py).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from nats.aio.msg import Msg
from pydantic import ValidationError

from echo_memory.libs.core.contracts.bus import Caller, Event
from echo_memory.libs.core.contracts.subjects import CONSOLIDATION_CONSUMER, PREFIX
from echo_memory.libs.server.bus.events import consume_events
from echo_memory.libs.server.service.context import ServiceContext
from echo_memory.services.consolidation import runs
from echo_memory.services.consolidation.failures import AGENT, record_failure
from echo_memory.services.consolidation.worker import RunJob, RunProcess

log = logging.getLogger(__name__)

FACT_EVENTS = f"{PREFIX}.*.events.fact.>"
BATCH = 100
FETCH_WAIT = 1.0  # seconds a fetch waits for events before the loop looks at the clock again


@dataclass
class Dirty:
    first: float
    last: float


@dataclass
class Scheduler:
    ctx: ServiceContext
    process: RunProcess
    dirty: dict[tuple[str, str], Dirty] = field(default_factory=dict)  # (org, scope id) -> when events came
    orgs: set[str] = field(default_factory=set)
    last_sweep: float = field(default_factory=time.monotonic)
    runs_done: int = 0

    def __post_init__(self) -> None:
        if self.ctx.settings.database_url is not None:
            self.orgs.add(self.ctx.settings.org)

    async def run(self) -> None:
        """Consume fact events and run what is due, until cancelled."""
        await consume_events(self.ctx.settings, FACT_EVENTS, CONSOLIDATION_CONSUMER, self.note, batch=BATCH,
                             fetch_wait=FETCH_WAIT, after_fetch=self._run_due_now)

    async def _run_due_now(self) -> None:
        await self.run_due(time.monotonic())

    async def note(self, msg: Msg) -> None:
        """Mark the event's scope dirty; acknowledged either way (the sweep covers what is dropped)."""
        try:
            event = Event.model_validate_json(msg.data)
            scope_id = str(event.payload["scope_id"])
        except (ValidationError, KeyError) as exc:
            log.warning("consolidation: ignoring an event it cannot read on %s: %s", msg.subject, exc)
        else:
            now = time.monotonic()
            seen = self.dirty.setdefault((event.org, scope_id), Dirty(now, now))
            seen.last = now
            self.orgs.add(event.org)
        await msg.ack()

    def due(self, now: float) -> list[tuple[str, str]]:
        """Dirty scopes quiet for the debounce time, or waiting longer than the longest wait."""
        policy = self.ctx.settings.consolidation
        return sorted(key for key, seen in self.dirty.items()
                      if now - seen.last >= policy.debounce_seconds or now - seen.first >= policy.max_wait_seconds)

    async def run_due(self, now: float) -> None:
        for org, scope_id in self.due(now):
            self.dirty.pop((org, scope_id), None)
            await self.run_scope(org, scope_id)
        if now - self.last_sweep >= self.ctx.settings.consolidation.sweep_minutes * 60:
            self.last_sweep = now
            for org in sorted(self.orgs):
                await self.sweep(org)

    async def sweep(self, org: str) -> None:
        try:
            async with self.ctx.databases.transaction(org) as conn:
                scopes = await runs.scopes_to_run(conn, None)
        except Exception as exc:  # noqa: BLE001 - the next sweep tries again; logged typed
            await record_failure(self.ctx, org, None, "sweep", exc)
            return
        for scope in scopes:
            await self.run_scope(org, scope.id)

    async def run_scope(self, org: str, scope_id: str) -> None:
        """One run of one scope under its lease; failures are logged and counted, never raised."""
        metrics = self.ctx.metrics.consolidation
        caller = Caller(org=org, agent_id=AGENT, read_scopes=["*"], write_scopes=[])
        try:
            job = RunJob(caller=caller, scope_id=scope_id, policy=self.ctx.settings.consolidation, lease=True)
            outcome = await self.process.run(org, job)
        except Exception as exc:  # noqa: BLE001 - one scope's failure must not stop the others; logged typed
            await record_failure(self.ctx, org, scope_id, "run", exc)
            return
        if outcome.leased_elsewhere:
            metrics.labels("skipped").inc()
        if outcome.run is not None:  # None: leased elsewhere, or erased or deleted since the event
            self.runs_done += 1
            runs.count_run(metrics, outcome.run.counts)
