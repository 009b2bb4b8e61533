"""Facts written since a scope's last run, copied into the hot tier's indexes between runs.

A write leaves its facts in `hot_pending` (a narrow row: the write path does no vector index work
for the hot tier), and a run copies those it keeps hot into `hot_facts`. A run over a million
facts takes ~11 minutes, and until it ends the facts written meanwhile wait: past 2,000 of them a
hot search filters the facts table instead of reading the hot tier's indexes (at 1M facts under
steady writes, p50 0.9-1.7 s instead of ~35 ms). So every `hot_copy_seconds` this task copies
what writes added to the scopes a run has placed, `BATCH` facts per transaction, each under the
scope's hot lock (queries.HOT_LOCK). A scope whose lock is taken (a run applying its moves, another
replica's copy) waits for the next tick; nothing waits for the copy but a run's last statements,
for one batch. What waits for a scope's first run (a bulk load, an import, everything before an
upgrade), and facts back in the hot tier after an undo, are left to the next run, which may place
them lower.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import psycopg

from echo_memory.libs.server.service.context import ServiceContext
from echo_memory.services.consolidation import queries as q
from echo_memory.services.consolidation.failures import record_failure

# Facts per transaction. Each is an HNSW insert of a few ms of Postgres CPU, and a run reaching its
# tier moves waits for the batch in hand: 500 keeps that wait to a second or two.
BATCH = 500
COPIED = "hot_copied"  # the `echo_consolidation` outcome counting facts copied between runs


@dataclass
class HotCopy:
    """The copy task of one service process; `orgs` is shared with the scheduler, which adds the
    orgs whose events it sees."""

    ctx: ServiceContext
    orgs: set[str] = field(default_factory=set)
    copied: int = 0

    def __post_init__(self) -> None:
        if self.ctx.settings.database_url is not None:
            self.orgs.add(self.ctx.settings.org)

    async def run(self) -> None:
        """Copy every `hot_copy_seconds` until cancelled (never, when that is 0)."""
        every = self.ctx.settings.consolidation.hot_copy_seconds
        if every <= 0:
            return
        while True:
            await asyncio.sleep(every)
            for org in sorted(self.orgs):
                await self.copy_org(org)

    async def copy_org(self, org: str) -> None:
        """Copy what waits in every scope of `org`. Failures are logged, counted and recorded
        (failures.py), never raised: the next tick tries again."""
        try:
            async with self.ctx.databases.transaction(org) as conn:
                scopes = [row[0] for row in await (await conn.execute(q.SCOPES_WRITTEN_WAITING)).fetchall()]
        except Exception as exc:  # noqa: BLE001 - the next tick tries again; logged typed
            await record_failure(self.ctx, org, None, "hot copy", exc)
            return
        for scope_id in scopes:
            try:
                await self.copy_scope(org, scope_id)
            except Exception as exc:  # noqa: BLE001 - one scope's failure must not stop the others
                await record_failure(self.ctx, org, scope_id, "hot copy", exc)

    async def copy_scope(self, org: str, scope_id: str) -> None:
        """Copy the scope's written facts batch by batch until none wait or its lock is taken (a
        fact placed out of the hot tier since leaves `hot_pending` uncopied)."""
        while True:
            async with self.ctx.databases.transaction(org) as conn:
                taken, added = await copy_batch(conn, scope_id)
            self.copied += added
            self.ctx.metrics.consolidation.labels(COPIED).inc(added)
            if taken < BATCH:
                return


async def copy_batch(conn: psycopg.AsyncConnection, scope_id: str, batch: int = BATCH) -> tuple[int, int]:
    """In the caller's transaction: up to `batch` of the scope's written facts leave `hot_pending`,
    and those still hot are copied into `hot_facts`. Returns (left, copied); (0, 0) when the
    scope's hot lock is held elsewhere or none wait."""
    params = {"scope_id": scope_id}
    if not (await (await conn.execute(q.TRY_HOT_LOCK, params)).fetchone())[0]:  # type: ignore[index]
        return 0, 0
    fact_ids = [row[0] for row in await (await conn.execute(q.LOCK_WRITTEN_BATCH, {**params, "batch": batch})).fetchall()]
    if not fact_ids:
        return 0, 0
    taken, added = (await (await conn.execute(q.INDEX_WRITTEN_HOT, {**params, "fact_ids": fact_ids})).fetchone())  # type: ignore[misc]
    return int(taken), int(added)
