"""write_episode: resolve entities, supersede or restate edges, audit and emit events — atomically.

The service runtime owns the one transaction (libs/server/service/routes.py): an `EchoError`
raised here rolls everything back and reaches the caller as that typed error, which the edge
renders as a refusal in the tool's result shape. The order of work is chosen so that an outcome which stores
nothing (deferred, unchanged, no_facts) inserts no memory row at all (a deferral is noted in the
bookkeeping table deferred_mentions, for `health`):

    check shape and secrets → scope → embed (outside the lock) → scope write lock →
    resolve mentions (read only) → classify facts (restated / to write / deferred) →
    create entities, learn aliases → episode → facts → audit rows → outbox events

The facts' vectors, and those of the names the call declares new, are computed in worker
threads from the start and awaited only when they are inserted, so the model and the database
work at the same time. Only names some fact uses are embedded.

Owned here: `episodes`, `facts`, `audit_log` and `outbox` rows of a write. Entity SQL lives in
entities.py; the response shape in libs/core/contracts/write.py; the contract in
docs/tools/write_episode.md.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.core.contracts.identity import is_post_hoc
from echo_memory.libs.core.contracts.write import (
    AliasedMention,
    DeferredMention,
    EdgeRef,
    FactIn,
    NotStored,
    WriteEpisodeInput,
    WriteEpisodeResult,
)
from echo_memory.libs.core.secrets import find_secret
from echo_memory.libs.server.embed import MiniLM, count_tokens, settle
from echo_memory.libs.server.store.access import Scope, resolve_scope
from echo_memory.libs.server.telemetry import db_span, steps
from echo_memory.services.writes import entities
from echo_memory.services.writes import queries as q
from echo_memory.services.writes.entities import Mention, key
from echo_memory.services.writes.evidence import readable_episodes


def normal_relation(relation: str) -> str:
    """Relations compare case-insensitively with runs of spaces collapsed ("Uses" is "uses")."""
    return " ".join(relation.split())


def check_shape(args: WriteEpisodeInput) -> None:
    """Rules across fields that pydantic alone does not express, and the secret check.

    Raises InvalidArgument naming the fact or entity by position, never quoting a secret.
    """
    known = {key(e.name) for e in args.entities} | {key(a) for e in args.entities for a in e.aliases}
    known |= {key(r.mention) for r in args.entity_resolutions}
    seen: dict[tuple[str, str, str], int] = {}
    for index, fact in enumerate(args.facts, start=1):
        for role in ("source", "target"):
            mention = getattr(fact, role)
            if key(mention) not in known:
                raise InvalidArgument(
                    f"fact {index}: {role} '{mention[:100]}' is not among this call's entities (names or aliases); "
                    "add it to entities"
                )
        edge = (key(fact.source), key(fact.target), normal_relation(fact.relation).lower())
        if edge in seen:
            raise InvalidArgument(
                f"facts {seen[edge]} and {index} both claim ({fact.source[:60]}, {fact.relation[:60]}, "
                f"{fact.target[:60]}); send one claim per edge"
            )
        seen[edge] = index
    _refuse_secrets(args)


def _refuse_secrets(args: WriteEpisodeInput) -> None:
    fields: list[tuple[str, str]] = [("session_id", args.session_id), ("project", args.project or ""),
                                     ("idempotency_key", args.idempotency_key or "")]
    for i, fact in enumerate(args.facts, start=1):
        fields += [(f"fact {i} ({name})", getattr(fact, name)) for name in ("fact", "relation", "source", "target")]
    for i, entity in enumerate(args.entities, start=1):
        fields += [(f"entity {i} (name)", entity.name), (f"entity {i} (type)", entity.type)]
        fields += [(f"entity {i} (aliases)", alias) for alias in entity.aliases]
    for i, resolution in enumerate(args.entity_resolutions, start=1):
        fields += [(f"entity_resolutions {i} (mention)", resolution.mention),
                   (f"entity_resolutions {i} (rationale)", resolution.rationale or "")]
    for where, text in fields:
        kind = find_secret(text)
        if kind:
            raise InvalidArgument(
                f"{where} contains {kind}; secrets are never stored. Remove it (say where the secret lives "
                "instead, e.g. 'the key is in the team vault') and send the call again"
            )


@dataclass
class _Planned:
    fact: FactIn
    source: Mention
    target: Mention
    relation: str
    active: dict[str, Any] | None
    index: int  # the fact's position in the call, which is also its vector's


async def write_episode(
    conn: psycopg.AsyncConnection, caller: Caller, args: WriteEpisodeInput, embedder: MiniLM
) -> WriteEpisodeResult:
    """Store one extraction; returns the outcome (stored, partial, deferred, unchanged, no_facts).

    Raises an `EchoError` (the caller turns it into `not_stored="refused"`) for bad arguments,
    secrets, unknown or unwritable scopes and entity ids not in the scope.
    """
    with steps.step("check_shape"):
        check_shape(args)
    if not args.facts:
        # The scope is still checked, inside a savepoint rolled back at once: a first write to
        # `solo` creates its scope row, and an outcome that stores nothing leaves no row at all.
        async with conn.transaction(force_rollback=True):
            scope = await resolve_scope(conn, caller, args.scope, "write")
        return WriteEpisodeResult(stored=False, not_stored="no_facts", scope=scope.name)
    by_key = entities.call_entities(args)
    referenced = {id(by_key[key(f.source)]) for f in args.facts} | {id(by_key[key(f.target)]) for f in args.facts}
    # Embedding is the slow part of a write (onnxruntime releases the GIL): the facts' texts and
    # the names the call declares new (they become entities whatever the store holds) start now,
    # each in its own thread, and are needed only at insert time.
    declared_new = entities.declared_new(args, by_key, referenced)
    fact_job = asyncio.create_task(asyncio.to_thread(_embed, embedder, [f.fact for f in args.facts], "embed_facts"))
    new_job = (
        asyncio.create_task(asyncio.to_thread(_embed, embedder, declared_new, "embed_names")) if declared_new else None
    )
    try:
        return await _store(conn, caller, args, embedder, by_key, referenced, fact_job, (declared_new, new_job))
    finally:
        await settle(fact_job)
        if new_job is not None:
            await settle(new_job)


async def _store(
    conn: psycopg.AsyncConnection,
    caller: Caller,
    args: WriteEpisodeInput,
    embedder: MiniLM,
    by_key: dict[str, Mention],
    referenced: set[int],
    fact_job: asyncio.Task[np.ndarray],
    new_names: tuple[list[str], asyncio.Task[np.ndarray] | None],
) -> WriteEpisodeResult:
    with steps.step("resolve_scope"):
        scope = await resolve_scope(conn, caller, args.scope, "write")
    if args.source_episode_ids:
        with steps.step("source_episodes"):
            await readable_episodes(conn, caller, args.source_episode_ids, imported_only=False)

    # Known names resolve before the lock and need no vector; the others that no resolution
    # declares new may be near matches, so they are embedded now, before the lock.
    choices = entities.choices_of(args, by_key)
    with steps.step("exact_names"):
        await entities.resolve_known(conn, scope, choices, by_key, referenced)
    early = set(new_names[0])
    names = [m.name for m in entities.unique(by_key)
             if id(m) in referenced and entities.needs_vector(m, choices) and m.name not in early]
    with steps.step("wait_name_vectors"):
        embedded: np.ndarray | list[np.ndarray] = (
            await asyncio.to_thread(_embed, embedder, names, "embed_names") if names else []
        )
    vectors = dict(zip(names, embedded, strict=True))

    with db_span("scope_write_lock", org=caller.org), steps.step("lock_wait"):
        now: datetime = (await (await conn.execute(q.LOCK_SCOPE_THEN_NOW, (scope.id,))).fetchone())[0]  # type: ignore[index]

    with steps.step("plan_entities"):
        limits = await entities.thresholds(conn)
        await entities.plan(conn, scope, choices, by_key, referenced, vectors, limits)
    with steps.step("active_edges"):
        planned, restated, deferred = await _classify(conn, caller, scope, args, by_key)
    entities.refuse_new_that_exists([m for p in planned for m in (p.source, p.target)])
    with steps.step("deferral_bookkeeping"):
        await _track_deferrals(conn, caller, scope, args, deferred)

    if not planned:
        outcome: NotStored = "deferred" if deferred else "unchanged"
        return WriteEpisodeResult(
            stored=False, not_stored=outcome, restated=restated, deferred=deferred, scope=scope.name
        )

    if new_names[1] is not None:
        with steps.step("wait_name_vectors"):
            vectors.update(zip(new_names[0], await new_names[1], strict=True))
    endpoints = entities.unique({str(id(m)): m for p in planned for m in (p.source, p.target)})
    taken = {m.entity_id for m in entities.unique(by_key) if m.entity_id is not None}
    for mention in endpoints:
        if mention.entity_id is None and id(mention) in choices:
            # An answered deferral: the candidates the agent said "new" to are kept in the audit
            # row, so calibration can count them as look-alikes.
            with steps.step("near_match"):
                judged = await entities.candidates_for(conn, scope, mention, vectors[mention.name], by_key, taken)
            mention.rejected = [c for c in judged if c.score >= limits.defer_at][: entities.NEAR_MATCH_CANDIDATES]
        with steps.step("insert_entities"):
            await entities.materialise(conn, scope, mention, caller.agent_id, vectors)
        await _audit_entity(conn, caller, args, scope, mention)
    with steps.step("insert_episode"):
        episode_id = await _insert_episode(conn, caller, args, scope, [p.fact for p in planned], embedder.name)
    with steps.step("wait_fact_vectors"):
        fact_vectors = await fact_job
    created = [
        await _write_fact(conn, caller, args, scope, p, fact_vectors[p.index], episode_id=episode_id, now=now)
        for p in planned
    ]
    aliased = [
        AliasedMention(mention=m.name, entity_id=m.variant.entity_id, entity=m.variant.name, rule=m.variant.rule,
                       score=m.variant.score)
        for m in endpoints if m.variant is not None
    ]
    return WriteEpisodeResult(
        stored=True,
        partial=bool(deferred),
        edges_created=created,
        restated=restated,
        deferred=deferred,
        aliased=aliased,
        scope=scope.name,
    )


async def _track_deferrals(
    conn: psycopg.AsyncConnection, caller: Caller, scope: Scope, args: WriteEpisodeInput,
    deferred: list[DeferredMention],
) -> None:
    """Record the answers this call gives to earlier deferrals, then the mentions it defers now."""
    if args.entity_resolutions:
        await conn.execute(q.RESOLVE_DEFERRALS, {
            "scope_id": scope.id, "agent_id": caller.agent_id,
            "mentions": [r.mention for r in args.entity_resolutions],
            "entity_ids": [r.entity_id for r in args.entity_resolutions],
        })
    for d in deferred:
        await conn.execute(q.RECORD_DEFERRAL, {
            "scope_id": scope.id, "agent_id": caller.agent_id, "mention": d.mention,
            "candidates": Jsonb([c.model_dump(mode="json") for c in d.candidates]),
        })


async def _classify(
    conn: psycopg.AsyncConnection,
    caller: Caller,
    scope: Scope,
    args: WriteEpisodeInput,
    by_key: dict[str, Mention],
) -> tuple[list[_Planned], list[EdgeRef], list[DeferredMention]]:
    """Split the facts into edges to write, restatements of the active edge, and deferred mentions."""
    planned: list[_Planned] = []
    restated: list[EdgeRef] = []
    waiting: dict[int, Mention] = {}
    waiting_facts: dict[int, list[int]] = {}
    seen: dict[tuple[object, object, str], int] = {}
    for index, fact in enumerate(args.facts, start=1):
        source, target = by_key[key(fact.source)], by_key[key(fact.target)]
        blocked = [m for m in (source, target) if m.deferred]
        if blocked:
            for mention in blocked:
                waiting.setdefault(id(mention), mention)
                waiting_facts.setdefault(id(mention), []).append(index)
            continue
        relation = normal_relation(fact.relation)
        # Two facts of one call can land on one edge once mentions resolve (e.g. "Postgres" and
        # "PostgreSQL" both confirmed as one entity); one claim per edge keeps history honest.
        edge = (source.entity_id or id(source), target.entity_id or id(target), relation.lower())
        if edge in seen:
            raise InvalidArgument(
                f"facts {seen[edge]} and {index} make two claims on one edge once their entities are "
                f"resolved ({source.display}, {relation}, {target.display}); send one claim per edge"
            )
        seen[edge] = index
        active = None
        if source.entity_id and target.entity_id:
            async with conn.cursor(row_factory=dict_row) as cur:
                with db_span("active_edge", org=caller.org):
                    await cur.execute(
                        q.ACTIVE_EDGE,
                        {"scope_id": scope.id, "source": source.entity_id, "target": target.entity_id,
                         "relation": relation},
                    )
                    active = await cur.fetchone()
        claim = {"text": fact.fact, "confidence": fact.confidence, "causal_hint": fact.causal_hint}
        if active is not None and all(active[k] == v for k, v in claim.items()):
            restated.append(EdgeRef(fact_id=str(active["id"]), source=source.display, target=target.display,
                                    relation=active["relation"]))
            continue
        planned.append(_Planned(fact, source, target, relation, active, index - 1))
    deferred = [
        DeferredMention(mention=m.name, candidates=m.candidates, waiting_facts=waiting_facts[id(m)],
                        answer=_answer(m, waiting_facts[id(m)]))
        for m in waiting.values()
    ]
    return planned, restated, deferred


def _answer(mention: Mention, facts: list[int]) -> str:
    """What the agent sends back: one entity_resolutions entry for the mention, with the waiting facts."""
    ids = " or ".join(f'"{c.entity_id}" ({c.name})' for c in mention.candidates)
    positions = ", ".join(str(i) for i in facts)
    return (
        f"'{mention.name}' may be a stored entity: send the call again with the waiting fact(s) {positions} and "
        f'entity_resolutions: [{{"mention": "{mention.name}", "entity_id": {ids} or "new"}}] — '
        'an id if the mention names that entity (its name becomes an alias), "new" if it is a different one.'
    )


async def _insert_episode(
    conn: psycopg.AsyncConnection, caller: Caller, args: WriteEpisodeInput, scope: Scope, facts: list[FactIn],
    model: str,
) -> str:
    content = "\n".join(f.fact for f in facts)
    row = await (
        await conn.execute(
            q.INSERT_EPISODE,
            {"scope_id": scope.id, "agent_id": caller.agent_id, "tool": caller.tool, "project": args.project,
             "session_id": args.session_id, "content": content, "tokens": count_tokens(content), "model": model,
             "metadata": Jsonb({"source_episode_ids": args.source_episode_ids} if args.source_episode_ids else {})},
        )
    ).fetchone()
    return str(row[0])  # type: ignore[index]


async def _write_fact(
    conn: psycopg.AsyncConnection,
    caller: Caller,
    args: WriteEpisodeInput,
    scope: Scope,
    p: _Planned,
    vector: np.ndarray,
    *,
    episode_id: str,
    now: datetime,
) -> EdgeRef:
    """End the active edge (if any) and insert the new one, with its audit row and outbox event."""
    fact = p.fact
    supersedes = str(p.active["id"]) if p.active is not None else None
    hint_added = _hint_added_later(p)
    if supersedes is not None:
        with steps.step("insert_facts"):
            ended = await conn.execute(q.END_EDGE, {"now": now, "id": supersedes, "scope_id": scope.id})
        assert ended.rowcount == 1, "the active edge is row-locked, so it cannot end under us"
    with db_span("insert_fact", org=caller.org), steps.step("insert_facts"):
        row = await (
            await conn.execute(
                q.INSERT_FACT,
                {"scope_id": scope.id, "source": p.source.entity_id, "target": p.target.entity_id,
                 "relation": p.relation, "episode_id": episode_id, "text": fact.fact,
                 "confidence": fact.confidence, "causal_hint": fact.causal_hint,
                 "hint_origin": ("post_hoc" if hint_added else "write") if fact.causal_hint else None,
                 "now": now, "supersedes": supersedes,
                 "agent_id": caller.agent_id, "tool": caller.tool, "project": args.project,
                 "session_id": args.session_id, "embedding": vector, "tokens": count_tokens(fact.fact)},
            )
        ).fetchone()
    fact_id = str(row[0])  # type: ignore[index]
    edge = {"source": p.source.display, "target": p.target.display, "relation": p.relation}
    claim = {"text": fact.fact, "confidence": fact.confidence, "causal_hint": fact.causal_hint}
    event = {"fact_id": fact_id, "scope": scope.stored_name, "scope_id": scope.id}
    # Facts distilled from imported turns name them, so `why` and the audit log lead back to the evidence.
    origin = {"source_episode_ids": args.source_episode_ids} if args.source_episode_ids else {}
    since = f" (distilled from episode {', '.join(args.source_episode_ids)})" if args.source_episode_ids else ""
    if p.active is None:
        await audit(conn, caller, scope, kind="fact_created", session_id=args.session_id, fact_id=fact_id,
                    after={**edge, **claim, "fact_id": fact_id, **origin},
                    reason=f"{caller.agent_id} recorded that {fact.fact}{since}")
        await emit(conn, caller, "fact.created", event)
    elif hint_added:
        # The same claim, now with the causal hint it lacked: a new version like any change, but
        # audited as a post-hoc hint so trace_cause readers can tell it was not stated at the time.
        await audit(conn, caller, scope, kind="causal_hint_added", session_id=args.session_id, fact_id=fact_id,
                    before={"causal_hint": None, "fact_id": supersedes},
                    after={**edge, **claim, "fact_id": fact_id, **origin}, post_hoc=True,
                    reason=f"{caller.agent_id} added the causal hint '{fact.causal_hint}' to an existing claim{since}")
        await emit(conn, caller, "fact.superseded", {**event, "supersedes": supersedes})
    else:
        before = {k: p.active[k] for k in ("text", "confidence", "causal_hint")} | {"fact_id": supersedes}
        await audit(conn, caller, scope, kind="fact_superseded", session_id=args.session_id, fact_id=fact_id,
                    before=before, after={**edge, **claim, "fact_id": fact_id, **origin},
                    reason=f"{caller.agent_id} changed the claim on ({edge['source']}, {p.relation}, {edge['target']})"
                    f"{since}")
        await emit(conn, caller, "fact.superseded", {**event, "supersedes": supersedes})
    return EdgeRef(fact_id=fact_id, source=edge["source"], target=edge["target"], relation=p.relation,
                   supersedes=supersedes)


def _hint_added_later(p: _Planned) -> bool:
    """True when the only change to the active edge is a causal hint it did not have."""
    return (
        p.active is not None
        and p.active["causal_hint"] is None
        and p.fact.causal_hint is not None
        and p.active["text"] == p.fact.fact
        and p.active["confidence"] == p.fact.confidence
    )


async def _audit_entity(
    conn: psycopg.AsyncConnection, caller: Caller, args: WriteEpisodeInput, scope: Scope, m: Mention
) -> None:
    """entity_created for a new entity; entity_resolved (how = exact | alias | agent-confirmed) otherwise."""
    if m.created:
        after: dict[str, Any] = {"name": m.name, "type": m.type, "aliases": m.learned}
        if m.rejected:
            after["rejected_candidates"] = [c.model_dump() for c in m.rejected]
        await audit(conn, caller, scope, kind="entity_created", session_id=args.session_id, entity_id=m.entity_id,
                    after=after, reason=m.rationale or f"new entity '{m.name}'")
        return
    if m.how == "agent-confirmed":
        reason = f"the agent confirmed '{m.name}' is '{m.stored_name}'"
    elif m.how == "variant" and m.variant is not None:
        reason = (f"'{m.name}' is the same name as '{m.variant.matched_name}' of '{m.stored_name}' written another "
                  f"way ({m.variant.rule}, score {m.variant.score})")
    else:
        reason = f"'{m.name}' matched the stored {'name' if m.how == 'exact' else 'alias'} of '{m.stored_name}'"
    resolved: dict[str, Any] = {"mention": m.name, "entity": m.stored_name, "how": m.how, "aliases_learned": m.learned}
    if m.variant is not None:
        resolved |= {"rule": m.variant.rule, "score": m.variant.score, "matched_name": m.variant.matched_name}
    await audit(conn, caller, scope, kind="entity_resolved", session_id=args.session_id, entity_id=m.entity_id,
                after=resolved, reason=m.rationale or reason)


async def audit(
    conn: psycopg.AsyncConnection,
    caller: Caller,
    scope: Scope | None,
    *,
    kind: str,
    reason: str,
    session_id: str | None = None,
    fact_id: str | None = None,
    entity_id: str | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    post_hoc: bool = False,
) -> None:
    """One audit row in the caller's transaction (kinds: libs/core/contracts/audit.py AUDIT_KINDS).

    Rows written as a post-hoc command's identity (libs/core/contracts/identity.py) are always post-hoc.
    """
    post_hoc = post_hoc or is_post_hoc(caller)
    with steps.step("audit"):
        await conn.execute(
            q.INSERT_AUDIT,
            {"scope_id": scope.id if scope else None, "kind": kind, "agent_id": caller.agent_id,
             "session_id": session_id, "tool": caller.tool, "fact_id": fact_id, "entity_id": entity_id,
             "before": Jsonb(before) if before is not None else None,
             "after": Jsonb(after) if after is not None else None, "reason": reason, "post_hoc": post_hoc},
        )


async def emit(conn: psycopg.AsyncConnection, caller: Caller, kind: str, payload: dict[str, Any]) -> None:
    """An outbox row in the caller's transaction; the relay publishes it to JetStream after commit."""
    with steps.step("outbox"):
        await conn.execute(q.INSERT_OUTBOX, (kind, json.dumps({"org": caller.org, **payload})))


def _embed(embedder: MiniLM, texts: list[str], step: str) -> np.ndarray:
    """The model's vectors for `texts`, timed as `step` when a profiler collects (runs in a worker thread)."""
    with steps.step(step):
        return embedder.embed(texts)
