"""write_episode: resolve entities, supersede or restate edges, audit and emit events — atomically.

The service runtime owns the one transaction (libs/server/service/routes.py): an `EchoError`
raised here rolls everything back and reaches the caller as that typed error, which the edge
renders as a refusal in the tool's result shape. The order of work is chosen so that an outcome which stores
nothing (deferred, unchanged, no_facts) inserts no memory row at all (a deferral is noted in the
bookkeeping table deferred_mentions, for `health`). `write_episode` runs these steps in order, each
on the request's one `EpisodeWrite` (write_state.py), and each refusal stops the write where it is:

    validate, refuse secrets      — InvalidArgument before anything is read
    resolve_scope_of              — the scope and any cited episodes (ScopeDenied, NotFound)
    resolve_entities              — conflicting entity_resolutions (InvalidArgument); exact names
                                    before the lock, near-match names embedded, then the scope
                                    write lock and entities.plan under it (bad or unknown ids)
    classify                      — restated / to write / deferred; two claims on one edge once
                                    resolved, or a "new" entity whose name is taken (InvalidArgument)
    track_deferrals               — deferred_mentions bookkeeping; stop here if nothing to write
    store_entities                — create entities, learn aliases, their audit rows
    store_episode, store_facts    — the episode, then per fact: end the active edge, insert,
                                    audit row, outbox event

The facts' vectors, and those of the names the call declares new, are computed in worker
threads from the start and awaited only when they are inserted, so the model and the database
work at the same time. Only names some fact uses are embedded.

Owned here: `episodes`, `facts`, `audit_log` and `outbox` rows of a write. Entity SQL lives in
entities.py; the response shape in libs/core/contracts/write.py; the contract in
docs/tools/write_episode.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.core.contracts.identity import is_post_hoc
from echo_memory.libs.core.contracts.write import (
    DeferredMention,
    EdgeRef,
    FactIn,
    WriteEpisodeInput,
    WriteEpisodeResult,
)
from echo_memory.libs.core.hygiene.instructions import instruction_flags
from echo_memory.libs.core.secrets import find_secret
from echo_memory.libs.server.embed import MiniLM, count_tokens
from echo_memory.libs.server.store.access import Scope, resolve_scope
from echo_memory.libs.server.telemetry import db_span, steps
from echo_memory.services.writes import entities
from echo_memory.services.writes import queries as q
from echo_memory.services.writes.evidence import readable_episodes
from echo_memory.services.writes.write_state import EpisodeWrite, Mention, PlannedFact, key


def normal_relation(relation: str) -> str:
    """Relations compare case-insensitively with runs of spaces collapsed ("Uses" is "uses")."""
    return " ".join(relation.split())


def check_shape(args: WriteEpisodeInput) -> None:
    """The checks a call passes before anything is read: its shape, then its secrets.

    Raises InvalidArgument naming the fact or entity by position, never quoting a secret.
    """
    validate(args)
    refuse_secrets(args)


def validate(args: WriteEpisodeInput) -> None:
    """Rules across fields that pydantic alone does not express: every endpoint is declared, one claim per edge."""
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


def refuse_secrets(args: WriteEpisodeInput) -> None:
    """InvalidArgument when any text field of the call holds a secret; the message names the field and kind only."""
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


async def write_episode(
    conn: psycopg.AsyncConnection, caller: Caller, args: WriteEpisodeInput, embedder: MiniLM
) -> WriteEpisodeResult:
    """Store one extraction; returns the outcome (stored, partial, deferred, unchanged, no_facts).

    Raises an `EchoError` (the caller turns it into `not_stored="refused"`) for bad arguments,
    secrets, unknown or unwritable scopes and entity ids not in the scope.
    """
    with steps.step("check_shape"):
        validate(args)
        refuse_secrets(args)
    if not args.facts:
        return await _no_facts(conn, caller, args)
    write = EpisodeWrite(conn, caller, args, embedder)
    write.start_embedding()
    try:
        await resolve_scope_of(write)
        await resolve_entities(write)
        await classify(write)
        await track_deferrals(write)
        if not write.planned:
            return write.not_stored()
        # Each audit row and outbox event is written right after the row it describes, so their
        # ids follow the order of the writes.
        await store_entities(write)
        await store_episode(write)
        await store_facts(write)
        return write.stored()
    finally:
        await write.settle()


async def _no_facts(conn: psycopg.AsyncConnection, caller: Caller, args: WriteEpisodeInput) -> WriteEpisodeResult:
    """A call with no facts stores nothing, but its scope is still checked.

    Inside a savepoint rolled back at once: a first write to `solo` creates its scope row, and an
    outcome that stores nothing leaves no row at all.
    """
    async with conn.transaction(force_rollback=True):
        scope = await resolve_scope(conn, caller, args.scope, "write")
    return WriteEpisodeResult(stored=False, not_stored="no_facts", scope=scope.name)


async def resolve_scope_of(w: EpisodeWrite) -> None:
    """The scope the call writes (refused unless the caller may write it), and its cited episodes' readability."""
    with steps.step("resolve_scope"):
        w.scope = await resolve_scope(w.conn, w.caller, w.args.scope, "write")
    if w.args.source_episode_ids:
        with steps.step("source_episodes"):
            await readable_episodes(w.conn, w.caller, w.args.source_episode_ids, imported_only=False)


async def resolve_entities(w: EpisodeWrite) -> None:
    """Which stored entity each mention names: known names and vectors before the lock, the rest under it.

    Known names resolve before the lock and need no vector; the others that no resolution
    declares new may be near matches, so they are embedded now, before the lock.
    """
    entities.record_choices(w)
    with steps.step("exact_names"):
        await entities.resolve_known(w)
    names = entities.names_to_embed(w)
    with steps.step("wait_name_vectors"):
        await w.embed_names(names)
    with db_span("scope_write_lock", org=w.caller.org), steps.step("lock_wait"):
        w.now = (await (await w.conn.execute(q.LOCK_SCOPE_THEN_NOW, (w.scope.id,))).fetchone())[0]  # type: ignore[index]
    with steps.step("plan_entities"):
        await entities.plan(w)


async def classify(w: EpisodeWrite) -> None:
    """Split the facts into edges to write, restatements of the active edge, and deferred mentions.

    Then refuses a fact to be written whose entity was declared "new" though its name is taken.
    """
    waiting: list[Mention] = []
    seen: dict[tuple[object, object, str], int] = {}
    with steps.step("active_edges"):
        for index, fact in enumerate(w.args.facts, start=1):
            source, target = w.mention(fact.source), w.mention(fact.target)
            blocked = [m for m in (source, target) if m.deferred]
            if blocked:
                for mention in blocked:
                    if not mention.waiting_facts:
                        waiting.append(mention)
                    mention.waiting_facts.append(index)
                continue
            relation = normal_relation(fact.relation)
            # Two facts of one call can land on one edge once mentions resolve (e.g. "Postgres" and
            # "PostgreSQL" both confirmed as one entity); one claim per edge keeps history honest.
            edge = (source.entity_id or source, target.entity_id or target, relation.lower())
            if edge in seen:
                raise InvalidArgument(
                    f"facts {seen[edge]} and {index} make two claims on one edge once their entities are "
                    f"resolved ({source.display}, {relation}, {target.display}); send one claim per edge"
                )
            seen[edge] = index
            active = await _active_edge(w, source, target, relation)
            if active is not None and _restates(fact, active):
                w.restated.append(EdgeRef(fact_id=str(active["id"]), source=source.display, target=target.display,
                                          relation=active["relation"]))
                continue
            w.planned.append(PlannedFact(fact, source, target, relation, active, index - 1))
        w.deferred = [
            DeferredMention(mention=m.name, candidates=m.candidates, waiting_facts=m.waiting_facts,
                            answer=_answer(m))
            for m in waiting
        ]
    entities.refuse_new_that_exists([m for p in w.planned for m in (p.source, p.target)])


async def _active_edge(w: EpisodeWrite, source: Mention, target: Mention, relation: str) -> dict[str, Any] | None:
    """The edge in force between two resolved entities under this relation (row-locked), if any."""
    if not (source.entity_id and target.entity_id):
        return None
    async with w.conn.cursor(row_factory=dict_row) as cur:
        with db_span("active_edge", org=w.caller.org):
            await cur.execute(
                q.ACTIVE_EDGE,
                {"scope_id": w.scope.id, "source": source.entity_id, "target": target.entity_id,
                 "relation": relation},
            )
            return await cur.fetchone()


def _restates(fact: FactIn, active: dict[str, Any]) -> bool:
    """True when the fact claims exactly what its active edge holds: nothing to write."""
    claim = {"text": fact.fact, "confidence": fact.confidence, "causal_hint": fact.causal_hint}
    return all(active[k] == v for k, v in claim.items())


def _answer(mention: Mention) -> str:
    """What the agent sends back: one entity_resolutions entry for the mention, with the waiting facts."""
    ids = " or ".join(f'"{c.entity_id}" ({c.name})' for c in mention.candidates)
    positions = ", ".join(str(i) for i in mention.waiting_facts)
    return (
        f"'{mention.name}' may be a stored entity: send the call again with the waiting fact(s) {positions} and "
        f'entity_resolutions: [{{"mention": "{mention.name}", "entity_id": {ids} or "new"}}] — '
        'an id if the mention names that entity (its name becomes an alias), "new" if it is a different one.'
    )


async def track_deferrals(w: EpisodeWrite) -> None:
    """Record the answers this call gives to earlier deferrals, then the mentions it defers now."""
    with steps.step("deferral_bookkeeping"):
        if w.args.entity_resolutions:
            await w.conn.execute(q.RESOLVE_DEFERRALS, {
                "scope_id": w.scope.id, "agent_id": w.caller.agent_id,
                "mentions": [r.mention for r in w.args.entity_resolutions],
                "entity_ids": [r.entity_id for r in w.args.entity_resolutions],
            })
        for d in w.deferred:
            await w.conn.execute(q.RECORD_DEFERRAL, {
                "scope_id": w.scope.id, "agent_id": w.caller.agent_id, "mention": d.mention,
                "candidates": Jsonb([c.model_dump(mode="json") for c in d.candidates]),
            })


async def store_entities(w: EpisodeWrite) -> None:
    """Create the written facts' new entities and learn their aliases, each with its audit row."""
    await w.await_new_names()
    w.endpoints = list(dict.fromkeys(m for p in w.planned for m in (p.source, p.target)))
    taken = w.taken()
    for mention in w.endpoints:
        await entities.note_rejected(w, mention, taken)
        with steps.step("insert_entities"):
            await entities.materialise(w, mention)
        await _audit_entity(w, mention)


async def store_episode(w: EpisodeWrite) -> None:
    """The episode row: the written facts' texts, as one extraction."""
    content = "\n".join(p.fact.fact for p in w.planned)
    args = w.args
    with steps.step("insert_episode"):
        row = await (
            await w.conn.execute(
                q.INSERT_EPISODE,
                {"scope_id": w.scope.id, "agent_id": w.caller.agent_id, "tool": w.caller.tool, "project": args.project,
                 "session_id": args.session_id, "content": content, "tokens": count_tokens(content),
                 "model": w.embedder.name, "flags": instruction_flags(content),
                 "metadata": Jsonb({"source_episode_ids": args.source_episode_ids} if args.source_episode_ids else {})},
            )
        ).fetchone()
    w.episode_id = str(row[0])  # type: ignore[index]


async def store_facts(w: EpisodeWrite) -> None:
    """Per fact, in the call's order: end the active edge and insert the new one, its audit row, its event."""
    with steps.step("wait_fact_vectors"):
        vectors = await w.fact_vectors()
    for p in w.planned:
        edge = await _insert_fact(w, p, vectors[p.index])
        await _audit_fact(w, p, edge)
        await _emit_fact(w, p, edge)
        w.created.append(edge)


async def _insert_fact(w: EpisodeWrite, p: PlannedFact, vector: np.ndarray) -> EdgeRef:
    """End the active edge (if any) at the lock's clock and insert the new version from it."""
    fact, args, supersedes = p.fact, w.args, p.supersedes
    if supersedes is not None:
        with steps.step("insert_facts"):
            ended = await w.conn.execute(q.END_EDGE, {"now": w.now, "id": supersedes, "scope_id": w.scope.id})
        assert ended.rowcount == 1, "the active edge is row-locked, so it cannot end under us"
    with db_span("insert_fact", org=w.caller.org), steps.step("insert_facts"):
        row = await (
            await w.conn.execute(
                q.INSERT_FACT,
                {"scope_id": w.scope.id, "source": p.source.entity_id, "target": p.target.entity_id,
                 "relation": p.relation, "episode_id": w.episode_id, "text": fact.fact,
                 "confidence": fact.confidence, "causal_hint": fact.causal_hint,
                 "hint_origin": ("post_hoc" if p.hint_added_later else "write") if fact.causal_hint else None,
                 "now": w.now, "supersedes": supersedes,
                 "agent_id": w.caller.agent_id, "tool": w.caller.tool, "project": args.project,
                 "session_id": args.session_id, "embedding": vector, "tokens": count_tokens(fact.fact),
                 # Labelled, never refused: the text is stored as written (docs/security.md).
                 "flags": instruction_flags(fact.fact, fact.relation, fact.source, fact.target)},
            )
        ).fetchone()
    return EdgeRef(fact_id=str(row[0]), source=p.source.display, target=p.target.display,  # type: ignore[index]
                   relation=p.relation, supersedes=supersedes)


async def _audit_fact(w: EpisodeWrite, p: PlannedFact, written: EdgeRef) -> None:
    """fact_created, causal_hint_added (post-hoc) or fact_superseded, with the claim before and after."""
    fact, caller, fact_id = p.fact, w.caller, written.fact_id
    edge = {"source": written.source, "target": written.target, "relation": p.relation}
    claim = {"text": fact.fact, "confidence": fact.confidence, "causal_hint": fact.causal_hint}
    # Facts distilled from imported turns name them, so `why` and the audit log lead back to the evidence.
    sources = w.args.source_episode_ids
    after = {**edge, **claim, "fact_id": fact_id, **({"source_episode_ids": sources} if sources else {})}
    since = f" (distilled from episode {', '.join(sources)})" if sources else ""
    if p.active is None:
        await audit(w.conn, AuditEntry(
            caller, w.scope, kind="fact_created", session_id=w.args.session_id, fact_id=fact_id, after=after,
            reason=f"{caller.agent_id} recorded that {fact.fact}{since}"))
    elif p.hint_added_later:
        # The same claim, now with the causal hint it lacked: a new version like any change, but
        # audited as a post-hoc hint so trace_cause readers can tell it was not stated at the time.
        await audit(w.conn, AuditEntry(
            caller, w.scope, kind="causal_hint_added", session_id=w.args.session_id, fact_id=fact_id,
            before={"causal_hint": None, "fact_id": written.supersedes}, after=after, post_hoc=True,
            reason=f"{caller.agent_id} added the causal hint '{fact.causal_hint}' to an existing claim{since}"))
    else:
        before = {k: p.active[k] for k in ("text", "confidence", "causal_hint")} | {"fact_id": written.supersedes}
        await audit(w.conn, AuditEntry(
            caller, w.scope, kind="fact_superseded", session_id=w.args.session_id, fact_id=fact_id,
            before=before, after=after,
            reason=f"{caller.agent_id} changed the claim on ({written.source}, {p.relation}, {written.target}){since}"))


async def _emit_fact(w: EpisodeWrite, p: PlannedFact, written: EdgeRef) -> None:
    """fact.created for a new edge, fact.superseded (naming the version it ends) for a changed one."""
    event = {"fact_id": written.fact_id, "scope": w.scope.stored_name, "scope_id": w.scope.id}
    if p.active is None:
        await emit(w.conn, w.caller, "fact.created", event)
    else:
        await emit(w.conn, w.caller, "fact.superseded", {**event, "supersedes": written.supersedes})


async def _audit_entity(w: EpisodeWrite, m: Mention) -> None:
    """entity_created for a new entity; entity_resolved (how = exact | alias | agent-confirmed) otherwise."""
    if m.created:
        after: dict[str, Any] = {"name": m.name, "type": m.type, "aliases": m.learned}
        if m.rejected:
            after["rejected_candidates"] = [c.model_dump() for c in m.rejected]
        await audit(w.conn, AuditEntry(
            w.caller, w.scope, kind="entity_created", session_id=w.args.session_id, entity_id=m.entity_id,
            after=after, reason=m.rationale or f"new entity '{m.name}'"))
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
    await audit(w.conn, AuditEntry(
        w.caller, w.scope, kind="entity_resolved", session_id=w.args.session_id, entity_id=m.entity_id,
        after=resolved, reason=m.rationale or reason))


@dataclass(frozen=True)
class AuditEntry:
    """One audit row: what happened (`kind`, `reason`), who did it (`caller`), where, and to what.

    Kinds: libs/core/contracts/audit.py AUDIT_KINDS. `before` and `after` are the JSON the row keeps.
    """

    caller: Caller
    scope: Scope | None
    kind: str
    reason: str
    session_id: str | None = None
    fact_id: str | None = None
    entity_id: str | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    post_hoc: bool = False


async def audit(conn: psycopg.AsyncConnection, entry: AuditEntry) -> None:
    """`entry` as one audit row in the caller's transaction.

    Rows written as a post-hoc command's identity (libs/core/contracts/identity.py) are always post-hoc.
    """
    post_hoc = entry.post_hoc or is_post_hoc(entry.caller)
    with steps.step("audit"):
        await conn.execute(q.INSERT_AUDIT, _audit_row(entry, post_hoc))


def _audit_row(entry: AuditEntry, post_hoc: bool) -> dict[str, Any]:
    # The named parameters of INSERT_AUDIT.
    return {"scope_id": entry.scope.id if entry.scope else None, "kind": entry.kind,
            "agent_id": entry.caller.agent_id, "session_id": entry.session_id, "tool": entry.caller.tool,
            "fact_id": entry.fact_id, "entity_id": entry.entity_id,
            "before": Jsonb(entry.before) if entry.before is not None else None,
            "after": Jsonb(entry.after) if entry.after is not None else None, "reason": entry.reason,
            "post_hoc": post_hoc}


async def emit(conn: psycopg.AsyncConnection, caller: Caller, kind: str, payload: dict[str, Any]) -> None:
    """An outbox row in the caller's transaction; the relay publishes it to JetStream after commit."""
    with steps.step("outbox"):
        await conn.execute(q.INSERT_OUTBOX, (kind, json.dumps({"org": caller.org, **payload})))

