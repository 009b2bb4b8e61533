"""A consolidation run over one scope: place every fact in its tier, build its digests, record it.

One transaction per scope. A run never takes the scope's write lock and never writes the facts
table: a tier move writes the fact's row in fact_tiers, which no write touches, so no write waits
for a run. It moves a fact only if the fact is still in the tier the run read, so a concurrent
run's move wins and is counted as skipped here. The hot tier's own indexes (`hot_facts`, migration
0025) follow the moves by trigger, and the run copies into them the facts written since the last
run that stay hot and were not copied between runs (hot_copy.py). Rows, vectors, edges and the
facts table's indexes are only read.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from prometheus_client import Counter
from psycopg.rows import dict_row

from echo_memory.libs.core.config.consolidation import ConsolidationSettings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.consolidation import (
    ConsolidateUndoResult,
    RunInfo,
    ScopeRun,
    TierCounts,
    TierMove,
)
from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound
from echo_memory.services.consolidation import digests
from echo_memory.services.consolidation import queries as q
from echo_memory.services.consolidation.loop import fetch_all
from echo_memory.services.consolidation.policy import FactActivity, Placement, direction, place_all

SAMPLE_MOVES = 20
# The counts of a run that the Prometheus counter `echo_consolidation{outcome}` adds up.
OUTCOMES = ("placed", "promoted", "demoted", "unchanged", "digests_built", "digests_ended", "digests_unchanged",
            "failed", "skipped")


def count_run(counter: Counter, counts: TierCounts) -> None:
    """Add one run's counts to `counter` (labelled by outcome)."""
    for outcome in OUTCOMES:
        counter.labels(outcome).inc(getattr(counts, outcome))


INSERT_AUDIT = """
INSERT INTO audit_log (scope_id, kind, agent_id, after, reason)
VALUES (%(scope_id)s, %(kind)s, %(agent_id)s, %(after)s, %(reason)s)
"""


@dataclass(frozen=True)
class ScopeRef:
    id: str
    name: str


async def scopes_to_run(conn: psycopg.AsyncConnection, name: str | None) -> list[ScopeRef]:
    """The named scope (NotFound when it does not exist), or every scope."""
    async with conn.cursor() as cur:
        if name is None:
            await cur.execute(q.SCOPES_ALL)
        else:
            await cur.execute(q.SCOPE_BY_NAME, {"name": name})
        rows = await cur.fetchall()
    if name is not None and not rows:
        raise NotFound(f"scope '{name}' does not exist (see `echo-memory status` for the scopes there are)")
    return [ScopeRef(row[0], row[1]) for row in rows]


async def scope_name(conn: psycopg.AsyncConnection, scope_id: str) -> str | None:
    """The name of the scope with id `scope_id`, or None when there is none."""
    row = await (await conn.execute(q.SCOPE_NAME, {"scope_id": scope_id})).fetchone()
    return None if row is None else str(row[0])


async def _activity(conn: psycopg.AsyncConnection, scope: ScopeRef, now: datetime,
                    policy: ConsolidationSettings) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.FACT_ACTIVITY, {"scope_id": scope.id, "hot_since": now - timedelta(days=policy.hot_days)})
        return await fetch_all(cur)


def _plan(rows: list[dict[str, Any]], now: datetime, policy: ConsolidationSettings,
          first_seen_after: datetime | None) -> tuple[list[Placement], TierCounts]:
    facts = [FactActivity(r["id"], r["tier"], r["written_at"], r["t_invalid"], r["last_read"], r["last_saved"],
                          bool(r["entity_read"])) for r in rows]
    placements = place_all(facts, now, policy)
    return placements, _counts(placements, first_seen_after)


def _counts(placements: list[Placement], first_seen_after: datetime | None) -> TierCounts:
    counts = TierCounts()
    for p in placements:
        step = direction(p)
        setattr(counts, step, getattr(counts, step) + 1)
        setattr(counts, p.tier, getattr(counts, p.tier) + 1)
        if first_seen_after is None or p.fact.written_at > first_seen_after:
            counts.placed += 1
    return counts


async def run_scope(conn: psycopg.AsyncConnection, caller: Caller, scope: ScopeRef,
                    policy: ConsolidationSettings, dry_run: bool) -> ScopeRun:
    """Place every fact of `scope` and rebuild its digests (entities, topics, areas); with `dry_run`,
    write nothing."""
    now = (await (await conn.execute("SELECT now()")).fetchone())[0]  # type: ignore[index]
    activity = await _activity(conn, scope, now, policy)
    previous = (await (await conn.execute(q.LAST_RUN_STARTED, {"scope_id": scope.id})).fetchone())[0]  # type: ignore[index]
    # Off the event loop (loop.py): placing a million facts is seconds of Python.
    placements, counts = await asyncio.to_thread(_plan, activity, now, policy, previous)
    del activity  # a row per fact, not needed while the digests are drafted
    moving = [p for p in placements if p.moves]
    sample = [TierMove(fact_id=p.fact.id, from_tier=p.fact.tier, to_tier=p.tier, reason=p.reason)
              for p in moving[:SAMPLE_MOVES]]
    drafts = await digests.drafts_for_scope(conn, scope.id, policy)
    if dry_run:
        counts.digests_built = len(drafts)
        return ScopeRun(run_id=None, scope=scope.name, policy_version=policy.policy_version, counts=counts,
                        moves_sample=sample)
    row = await (await conn.execute(q.INSERT_RUN, {"scope_id": scope.id, "actor": caller.agent_id,
                                                    "policy_version": policy.policy_version})).fetchone()
    run_id: str = row[0]  # type: ignore[index]
    stored = await digests.store_digests(conn, scope.id, run_id, drafts)
    counts.digests_built, counts.digests_ended, counts.digests_unchanged = stored.built, stored.ended, stored.unchanged
    # Tier moves last: their fact_tiers rows stay locked until the commit, and a concurrent run that
    # moves the same facts waits that long. So does the scope's hot lock (queries.HOT_LOCK), which a copy
    # between runs (hot_copy.py) holds for one batch at most.
    await conn.execute(q.HOT_LOCK, {"scope_id": scope.id})
    if moving:
        await conn.execute(q.INSERT_MOVES, {
            "run_id": run_id, "fact_ids": [p.fact.id for p in moving], "from_tiers": [p.fact.tier for p in moving],
            "to_tiers": [p.tier for p in moving], "reasons": [p.reason for p in moving],
        })
        applied = (await (await conn.execute(q.APPLY_MOVES, {"run_id": run_id, "scope_id": scope.id})).fetchone())[0]  # type: ignore[index]
        counts.skipped += len(moving) - int(applied)
    await conn.execute(q.INDEX_PENDING_HOT, {"scope_id": scope.id})
    if stored.built or stored.ended:
        # Statistics that see the new digests at commit: until autovacuum's analyze, the planner
        # took the digest statements of a hot search for a table it did not know (10k facts:
        # Postgres 98 CPU-ms a hot search straight after a first run, 41 with this).
        await conn.execute(q.ANALYZE_DIGESTS)
    payload = counts.model_dump()
    await conn.execute(q.FINISH_RUN, {"run_id": run_id, "scope_id": scope.id, "counts": json.dumps(payload)})
    await conn.execute(INSERT_AUDIT, {
        "scope_id": scope.id, "kind": "consolidation_run", "agent_id": caller.agent_id,
        "after": json.dumps({"run_id": run_id, "policy_version": policy.policy_version, "counts": payload}),
        "reason": f"consolidation run: {counts.promoted} promoted, {counts.demoted} demoted, "
                  f"{counts.digests_built} digests built",
    })
    return ScopeRun(run_id=run_id, scope=scope.name, policy_version=policy.policy_version, counts=counts,
                    moves_sample=sample)


async def run_log(conn: psycopg.AsyncConnection, scope: ScopeRef | None, limit: int) -> list[RunInfo]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.RUN_LOG, {"scope_id": scope.id if scope else None, "limit": limit})
        rows = await cur.fetchall()
    return [RunInfo(run_id=r["run_id"], scope=r["scope"], actor=r["actor"], policy_version=r["policy_version"],
                    started_at=r["started_at"], finished_at=r["finished_at"], undone_at=r["undone_at"],
                    counts=TierCounts.model_validate(r["counts"])) for r in rows]


async def undo_run(conn: psycopg.AsyncConnection, caller: Caller, run_id: str) -> ConsolidateUndoResult:
    """Put back every fact the run moved (unless a later run moved it again) and its digest versions.

    Raises NotFound for an unknown run, InvalidArgument for one already undone.
    """
    try:
        row = await (await conn.execute(q.RUN_FOR_UNDO, {"run_id": run_id})).fetchone()
    except psycopg.errors.InvalidTextRepresentation as exc:
        raise InvalidArgument(f"run id {run_id!r} is not a run id (see `echo-memory consolidate log`)") from exc
    if row is None:
        raise NotFound(f"no consolidation run {run_id} (see `echo-memory consolidate log`)")
    _, scope_id, undone_at, _ = row
    if undone_at is not None:
        raise InvalidArgument(f"run {run_id} was already undone at {undone_at.isoformat()}")
    params = {"run_id": run_id, "scope_id": scope_id}
    await conn.execute(q.HOT_LOCK, params)
    moved = (await (await conn.execute(q.COUNT_MOVES, params)).fetchone())[0]  # type: ignore[index]
    reverted = (await (await conn.execute(q.UNDO_MOVES, params)).fetchone())[0]  # type: ignore[index]
    started = (await conn.execute(q.UNDO_DIGESTS_STARTED, params)).rowcount
    reopened = (await conn.execute(q.UNDO_DIGESTS_ENDED, params)).rowcount
    await conn.execute(q.MARK_UNDONE, params)
    result = ConsolidateUndoResult(run_id=run_id, reverted=int(reverted), skipped=int(moved) - int(reverted),
                                   digests_reverted=started, digests_reopened=reopened)
    await conn.execute(INSERT_AUDIT, {
        "scope_id": scope_id, "kind": "consolidation_undone", "agent_id": caller.agent_id,
        "after": result.model_dump_json(), "reason": f"consolidation run {run_id} undone",
    })
    return result
