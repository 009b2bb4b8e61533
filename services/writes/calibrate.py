"""calibrate: is entity resolution trustworthy on this store? AUC, its interval, deferral precision.

Labelled pairs come from two places:
- the store's own decisions: a deferral an agent answered with an id (agent-confirmed: one
  entity), a deferral answered "new" (the candidates it rejected: two entities), and aliases
  agents declared or confirmed (one entity). Aliases the resolver learned by itself (how =
  variant) are left out: they would grade the score with its own answers;
- a person's identity decisions (`echo-memory entities merge|unmerge`, table entity_merges): a
  merge in force says one entity, an undone merge two; they count first, over any other source;
- the labelled set shipped with the product (resolution_eval.py), so that a young store with few
  decisions still gets a meaningful figure.

Each pair is scored by the resolver's own rules (name_match.judge) with the model's cosine. The
run is recorded in `resolution_calibration` (migration 0008), where `health` reads the newest row.
With `apply`, and only when the 95% interval of the combined AUC lies above 0.5 (and, once the
store has 30 pairs of its own of both kinds, its own interval too), the proposed thresholds are
recorded as applied and govern writes from then on. The proposed deferral
threshold catches the most variants while deferring at most 2% of look-alikes; the merge
threshold is only ever raised (above the best-scoring look-alike), never lowered: a wrong merge
costs more than a round trip.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.calibration import CalibrateInput, CalibrateResult, CalibrationFigures
from echo_memory.libs.core.contracts.identity import require_admin
from echo_memory.libs.server.embed import MiniLM
from echo_memory.services.writes import entities, identity_queries, name_match
from echo_memory.services.writes import resolution_eval as ev

LOOKALIKE_BUDGET = 0.02  # share of look-alikes a deferral threshold may catch
# From this many pairs of its own (both kinds present), a store's interval must exclude chance too:
# the shipped set must not outvote a store whose own decisions disagree with the score.
OWN_EVIDENCE = 30
GRID = [round(t, 2) for t in np.arange(0.30, 0.96, 0.01)]

CONFIRMED = """
SELECT a.after->>'mention', e.name, e.type FROM audit_log a JOIN entities e ON e.id = a.entity_id
WHERE a.kind = 'entity_resolved' AND a.after->>'how' = 'agent-confirmed'
"""
REJECTED = """
SELECT a.after->>'name', a.after->>'type', c->>'name', coalesce(e.type, 'unknown')
FROM audit_log a
CROSS JOIN LATERAL jsonb_array_elements(a.after->'rejected_candidates') AS c
LEFT JOIN entities e ON e.id::text = c->>'entity_id'
WHERE a.kind = 'entity_created' AND jsonb_typeof(a.after->'rejected_candidates') = 'array'
"""
# Aliases the resolver learned on its own (how = variant) would grade the score by itself.
ALIASES = """
SELECT al.alias, e.name, e.type FROM entity_aliases al JOIN entities e ON e.id = al.entity_id
WHERE NOT EXISTS (
    SELECT 1 FROM audit_log a
    WHERE a.kind = 'entity_resolved' AND a.entity_id = e.id AND a.after->>'how' = 'variant'
      AND lower(a.after->>'mention') = lower(al.alias))
"""
RECORD = """
INSERT INTO resolution_calibration (computed_by, store_pairs, labelled_pairs, auc, auc_low, auc_high,
    deferral_precision, deferral_recall, defer_at, merge_at, applied, details)
VALUES (%(by)s, %(store)s, %(labelled)s, %(auc)s, %(low)s, %(high)s, %(precision)s, %(recall)s,
    %(defer_at)s, %(merge_at)s, %(applied)s, %(details)s)
RETURNING id, computed_at
"""


async def store_pairs(conn: psycopg.AsyncConnection) -> tuple[list[ev.Pair], dict[str, int]]:
    """The store's resolution decisions as labelled pairs (deduplicated, order-free), and their counts."""
    pairs: dict[tuple[str, str], ev.Pair] = {}
    sources = {"confirmed_merges": 0, "new_answers": 0, "aliases": 0, "person_merges": 0, "person_unmerges": 0}

    def add(source: str, a: str, b: str, same: bool, type_: str) -> None:
        k = tuple(sorted((a.casefold().strip(), b.casefold().strip())))
        if k[0] == k[1] or k in pairs:
            return
        pairs[k] = ev.Pair("store", source, same, type_, a, b)  # type: ignore[index]
        sources[source] += 1

    # A person's decision outranks an agent's on the same pair: it is added first, and pairs dedupe.
    for absorbed, absorbed_type, surviving, surviving_type, undone in await (
            await conn.execute(identity_queries.MERGE_DECISIONS)).fetchall():
        kind = "person" if name_match.kind_of(str(absorbed_type), str(surviving_type)) == "person" else str(
            surviving_type)
        add("person_unmerges" if undone else "person_merges", str(absorbed), str(surviving), not undone, kind)
    for mention, name, type_ in await (await conn.execute(CONFIRMED)).fetchall():
        add("confirmed_merges", str(mention), str(name), True, str(type_))
    for alias, name, type_ in await (await conn.execute(ALIASES)).fetchall():
        add("aliases", str(alias), str(name), True, str(type_))
    for name, type_, other, other_type in await (await conn.execute(REJECTED)).fetchall():
        kind = "person" if name_match.kind_of(str(type_), str(other_type)) == "person" else str(type_)
        add("new_answers", str(name), str(other), False, kind)
    return list(pairs.values()), sources


async def calibrate(
    conn: psycopg.AsyncConnection, caller: Caller, args: CalibrateInput, embedder: MiniLM
) -> CalibrateResult:
    """Measure, record one resolution_calibration row, and apply thresholds when asked and sound.

    Raises ScopeDenied for any caller but the org's admin identity. A store with no decisions of
    its own is measured on the shipped set alone (`store` is then null).
    """
    require_admin(caller, "calibrate entity resolution")
    own, sources = await store_pairs(conn)
    labelled = ev.load_pairs()
    everything = own + labelled
    left = await asyncio.to_thread(embedder.embed, [p.a for p in everything])
    right = await asyncio.to_thread(embedder.embed, [p.b for p in everything])
    scored = ev.score_pairs(everything, ev.cosine_of(left, right))
    current = await entities.thresholds(conn)

    combined = _figures(scored, current, args.rounds)
    store = _figures(scored[: len(own)], current, args.rounds) if own else None
    defer_at = _proposed_defer_at(scored, current.defer_at)
    top_lookalike = max((s.score for s in scored if not s.same), default=0.0)
    merge_at = max(current.merge_at, min(1.0, round(top_lookalike + 0.01, 2)), defer_at)
    own_counts = bool(store is not None and store.pairs >= OWN_EVIDENCE and store.variants and store.lookalikes)
    sound = combined.auc_ci95[0] > 0.5 and (not own_counts or (store is not None and store.auc_ci95[0] > 0.5))
    applied = args.apply and sound
    changed = (defer_at, merge_at) != (current.defer_at, current.merge_at)
    details: dict[str, Any] = {
        "sources": sources, "combined": combined.model_dump(mode="json"),
        "store": store.model_dump(mode="json") if store else None,
        "before": {"defer_at": current.defer_at, "merge_at": current.merge_at},
        "proposed": {"defer_at": defer_at, "merge_at": merge_at}, "apply_asked": args.apply,
    }
    kept = (defer_at, merge_at) if applied else (current.defer_at, current.merge_at)
    row = await (await conn.execute(RECORD, {
        "by": caller.agent_id, "store": len(own), "labelled": len(labelled), "auc": combined.auc,
        "low": combined.auc_ci95[0], "high": combined.auc_ci95[1], "precision": combined.deferral_precision,
        "recall": combined.deferral_recall, "defer_at": kept[0], "merge_at": kept[1], "applied": applied,
        "details": Jsonb(details),
    })).fetchone()
    assert row is not None
    calibration_id, computed_at = int(row[0]), row[1]
    return CalibrateResult(
        calibration_id=calibration_id, computed_at=computed_at, store_pairs=len(own), store_sources=sources,
        store=store, combined=combined, defer_at=current.defer_at, merge_at=current.merge_at,
        proposed_defer_at=defer_at, proposed_merge_at=merge_at, applied=applied,
        message=_message(combined, sound, applied, changed, defer_at, merge_at, computed_at),
    )


def _figures(scored: list[ev.Scored], limits: entities.Thresholds, rounds: int) -> CalibrationFigures:
    r = ev.report(scored, defer_at=limits.defer_at, merge_at=limits.merge_at, rounds=rounds)
    return CalibrationFigures(
        pairs=r.pairs, variants=r.variants, lookalikes=r.lookalikes, auc=round(r.auc, 4),
        auc_ci95=(round(r.auc_ci[0], 4), round(r.auc_ci[1], 4)), deferral_precision=round(r.deferral_precision, 4),
        deferral_recall=round(r.deferral_recall, 4), lookalikes_caught=round(r.lookalikes_caught, 4),
    )


def _proposed_defer_at(scored: list[ev.Scored], current: float) -> float:
    """The grid threshold catching the most variants within the look-alike budget (ties: nearest current)."""
    variants = [s.score for s in scored if s.same]
    lookalikes = [s.score for s in scored if not s.same]
    best: tuple[float, float, float] | None = None
    chosen = current
    for t in GRID:
        caught_wrong = sum(x >= t for x in lookalikes) / len(lookalikes) if lookalikes else 0.0
        if caught_wrong > LOOKALIKE_BUDGET:
            continue
        caught = sum(x >= t for x in variants) / len(variants) if variants else 0.0
        rank = (caught, -caught_wrong, -abs(t - current))
        if best is None or rank > best:
            best, chosen = rank, t
    return chosen


def _message(
    combined: CalibrationFigures, sound: bool, applied: bool, changed: bool,
    defer_at: float, merge_at: float, at: datetime,
) -> str:
    low, high = combined.auc_ci95
    head = (f"Resolution AUC {combined.auc:.3f} (95% CI {low:.3f}–{high:.3f}) on {combined.pairs} pairs, "
            f"deferral precision {combined.deferral_precision:.3f}.")
    if not sound:
        return head + (" The interval (or the store's own) includes chance: resolution is not trustworthy here "
                       "and no threshold was changed.")
    if applied:
        return head + f" Applied: defer at {defer_at}, merge at {merge_at}, for writes from {at.isoformat()}."
    hint = " Run with --apply to use them." if changed else ""
    return head + f" Proposed thresholds: defer at {defer_at}, merge at {merge_at}.{hint}"
