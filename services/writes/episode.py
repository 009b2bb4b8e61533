"""write_episode: resolve entities, supersede or restate edges, audit and emit events — atomically.

The caller (the handler) owns the transaction. Any `EchoError` raised here rolls everything back,
and the handler turns it into a `refused` result; a deferral is not an error but stores only
the facts that do not touch a deferred mention.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from libs.contracts.bus import Caller
from libs.contracts.errors import InvalidArgument, NotFound
from libs.contracts.write import (
    Candidate,
    DeferredMention,
    EdgeRef,
    EntityIn,
    FactIn,
    WriteEpisodeInput,
    WriteEpisodeResult,
)
from libs.embed import MiniLM, count_tokens
from libs.store.scopes import Scope, resolve_scope
from libs.telemetry import db_span
from services.writes import queries as q
from services.writes.secrets import find_secret

# Cosine between entity names above which a new mention is deferred instead of created.
# MiniLM puts spelling variants ("Postgres"/"PostgreSQL", "k8s cluster"/"K8s clusters") above
# this and unrelated names of one domain below it; see docs/tools.md.
NEAR_MATCH_THRESHOLD = 0.86
NEAR_MATCH_CANDIDATES = 3

NEAREST_ENTITIES = """
SELECT id, name, 1 - (embedding <=> %(embedding)s) AS similarity FROM entities
WHERE scope_id = %(scope_id)s AND embedding IS NOT NULL
ORDER BY embedding <=> %(embedding)s LIMIT %(limit)s
"""
ENTITY_IN_SCOPE = "SELECT id, name FROM entities WHERE scope_id = %s AND id = %s"


@dataclass
class Resolution:
    entity_id: str | None = None
    name: str = ""
    created: bool = False
    deferred: list[Candidate] = field(default_factory=list)


def _key(name: str) -> str:
    return name.strip().casefold()


def check_shape(args: WriteEpisodeInput) -> None:
    """Rules across fields that pydantic alone does not express."""
    known = {_key(e.name) for e in args.entities} | {_key(a) for e in args.entities for a in e.aliases}
    known |= {_key(r.mention) for r in args.entity_resolutions}
    seen_keys: set[tuple[str, str, str]] = set()
    for index, fact in enumerate(args.facts, start=1):
        for role in ("source", "target"):
            mention = getattr(fact, role)
            if _key(mention) not in known:
                raise InvalidArgument(f"fact {index}: {role} '{mention}' is not among this call's entities")
        edge = (_key(fact.source), _key(fact.target), fact.relation.strip().casefold())
        if edge in seen_keys:
            raise InvalidArgument(
                f"fact {index}: a second claim for ({fact.source}, {fact.relation}, {fact.target}) in one call; "
                "send one claim per edge"
            )
        seen_keys.add(edge)
    for index, fact in enumerate(args.facts, start=1):
        for text in (fact.fact, fact.relation, fact.source, fact.target):
            kind = find_secret(text)
            if kind:
                raise InvalidArgument(f"fact {index} contains {kind}; secrets are never stored")
    for entity in args.entities:
        for text in (entity.name, *entity.aliases):
            kind = find_secret(text)
            if kind:
                raise InvalidArgument(f"entity '{entity.name[:40]}' contains {kind}; secrets are never stored")


async def write_episode(
    conn: psycopg.AsyncConnection, caller: Caller, args: WriteEpisodeInput, embedder: MiniLM
) -> WriteEpisodeResult:
    """Store one extraction; see docs/tools.md for every outcome."""
    check_shape(args)
    scope = await resolve_scope(conn, caller, args.scope, "write")
    if not args.facts:
        return WriteEpisodeResult(stored=False, not_stored="no_facts", scope=scope.name)
    with db_span("scope_write_lock", org=caller.org):
        await conn.execute(q.SCOPE_WRITE_LOCK, (scope.id,))
    now = (await (await conn.execute(q.TRANSACTION_NOW)).fetchone())[0]  # type: ignore[index]

    mentions = await _resolve_entities(conn, caller, args, scope, embedder)
    deferred = [
        DeferredMention(mention=r.name, candidates=r.deferred) for r in _unique(mentions) if r.deferred
    ]
    storable = [f for f in args.facts if not mentions[_key(f.source)].deferred and not mentions[_key(f.target)].deferred]
    if not storable:
        # Nothing can be stored without the caller's choice; undo the entities made so far.
        raise _Deferred(WriteEpisodeResult(stored=False, not_stored="deferred", deferred=deferred, scope=scope.name))

    episode_id = await _insert_episode(conn, caller, args, scope, storable)
    vectors = embedder.embed([f.fact for f in storable])
    created: list[EdgeRef] = []
    restated: list[EdgeRef] = []
    for fact, vector in zip(storable, vectors, strict=True):
        ref, was_restated = await _write_fact(
            conn, caller, args, scope, fact, vector, mentions, episode_id=episode_id, now=now
        )
        (restated if was_restated else created).append(ref)
    for resolution in _unique(mentions):
        if resolution.created and resolution.entity_id:
            await _audit(conn, caller, args, scope, kind="entity_created", entity_id=resolution.entity_id,
                         after={"name": resolution.name}, reason=f"new entity '{resolution.name}'")
    if not created:
        return WriteEpisodeResult(
            stored=False, not_stored="unchanged", restated=restated, deferred=deferred, scope=scope.name
        )
    return WriteEpisodeResult(
        stored=True,
        partial=bool(deferred),
        edges_created=created,
        restated=restated,
        deferred=deferred,
        scope=scope.name,
    )


class _Deferred(Exception):
    """Raised to roll the transaction back while still answering with a deferral."""

    def __init__(self, result: WriteEpisodeResult) -> None:
        super().__init__("deferred")
        self.result = result


def _unique(mentions: dict[str, Resolution]) -> list[Resolution]:
    seen: dict[int, Resolution] = {}
    for resolution in mentions.values():
        seen.setdefault(id(resolution), resolution)
    return list(seen.values())


async def _resolve_entities(
    conn: psycopg.AsyncConnection,
    caller: Caller,
    args: WriteEpisodeInput,
    scope: Scope,
    embedder: MiniLM,
) -> dict[str, Resolution]:
    """Map every mention (names, aliases, resolution mentions) to one Resolution per entity."""
    explicit = {_key(r.mention): r for r in args.entity_resolutions}
    by_mention: dict[str, Resolution] = {}
    by_entity: dict[str, Resolution] = {}

    def remember(resolution: Resolution, *keys: str) -> Resolution:
        if resolution.entity_id and resolution.entity_id in by_entity:
            resolution = by_entity[resolution.entity_id]  # two mentions of one entity are one entity
        elif resolution.entity_id:
            by_entity[resolution.entity_id] = resolution
        for key in keys:
            by_mention[key] = resolution
        return resolution

    entities: list[EntityIn] = list(args.entities)
    named = {_key(e.name) for e in entities}
    for mention in explicit:
        if mention not in named:
            entities.append(EntityIn(name=explicit[mention].mention, type="unknown"))

    for entity in entities:
        keys = [_key(entity.name), *(_key(a) for a in entity.aliases)]
        choice = explicit.get(_key(entity.name))
        if choice is not None and choice.entity_id != "new":
            row = await _entity_by_id(conn, scope, choice.entity_id)
            resolution = remember(Resolution(entity_id=row[0], name=row[1]), *keys)
            await _audit(conn, caller, args, scope, kind="entity_resolved", entity_id=row[0],
                         after={"mention": entity.name, "how": "agent-confirmed"},
                         reason=choice.rationale or f"agent confirmed '{entity.name}' is '{row[1]}'")
            continue
        existing = None if choice is not None else await _exact_match(conn, scope, entity)
        if existing is not None:
            remember(Resolution(entity_id=existing[0], name=existing[1]), *keys)
            continue
        vector = embedder.embed_one(entity.name)
        if choice is None:
            candidates = await _near_matches(conn, scope, vector)
            if candidates:
                remember(Resolution(name=entity.name, deferred=candidates), *keys)
                continue
        entity_id = await _create_entity(conn, caller, scope, entity, vector)
        remember(Resolution(entity_id=entity_id, name=entity.name, created=True), *keys)
    return by_mention


async def _entity_by_id(conn: psycopg.AsyncConnection, scope: Scope, entity_id: str) -> tuple[str, str]:
    try:
        uuid.UUID(entity_id)
    except ValueError:
        raise InvalidArgument(f"entity_resolutions: '{entity_id}' is not an entity id or \"new\"") from None
    row = await (await conn.execute(ENTITY_IN_SCOPE, (scope.id, entity_id))).fetchone()
    if row is None:
        raise NotFound(f"entity_resolutions: entity {entity_id} does not exist in scope '{scope.name}'")
    return str(row[0]), str(row[1])


async def _exact_match(conn: psycopg.AsyncConnection, scope: Scope, entity: EntityIn) -> tuple[str, str] | None:
    for name in (entity.name, *entity.aliases):
        rows = await (await conn.execute(q.FIND_ENTITY_BY_NAME, {"scope_id": scope.id, "name": name})).fetchall()
        if rows:
            return str(rows[0][0]), str(rows[0][1])
    return None


async def _near_matches(conn: psycopg.AsyncConnection, scope: Scope, vector: np.ndarray) -> list[Candidate]:
    rows = await (
        await conn.execute(
            NEAREST_ENTITIES, {"scope_id": scope.id, "embedding": vector, "limit": NEAR_MATCH_CANDIDATES}
        )
    ).fetchall()
    return [
        Candidate(entity_id=str(r[0]), name=str(r[1]), similarity=round(float(r[2]), 4))
        for r in rows
        if float(r[2]) >= NEAR_MATCH_THRESHOLD
    ]


async def _create_entity(
    conn: psycopg.AsyncConnection, caller: Caller, scope: Scope, entity: EntityIn, vector: np.ndarray
) -> str:
    with db_span("insert_entity", org=caller.org):
        row = await (
            await conn.execute(
                q.INSERT_ENTITY,
                {"scope_id": scope.id, "name": entity.name, "type": entity.type, "embedding": vector,
                 "agent_id": caller.agent_id},
            )
        ).fetchone()
    entity_id = str(row[0])  # type: ignore[index]
    for alias in entity.aliases:
        await conn.execute(q.INSERT_ALIAS, (entity_id, scope.id, alias))
    return entity_id


async def _insert_episode(
    conn: psycopg.AsyncConnection, caller: Caller, args: WriteEpisodeInput, scope: Scope, facts: list[FactIn]
) -> str:
    content = "\n".join(f.fact for f in facts)
    row = await (
        await conn.execute(
            q.INSERT_EPISODE,
            {"scope_id": scope.id, "agent_id": caller.agent_id, "tool": caller.tool, "project": args.project,
             "session_id": args.session_id, "content": content, "tokens": count_tokens(content)},
        )
    ).fetchone()
    return str(row[0])  # type: ignore[index]


async def _write_fact(
    conn: psycopg.AsyncConnection,
    caller: Caller,
    args: WriteEpisodeInput,
    scope: Scope,
    fact: FactIn,
    vector: np.ndarray,
    mentions: dict[str, Resolution],
    *,
    episode_id: str,
    now: datetime,
) -> tuple[EdgeRef, bool]:
    source, target = mentions[_key(fact.source)], mentions[_key(fact.target)]
    relation = fact.relation.strip()
    key = {"scope_id": scope.id, "source": source.entity_id, "target": target.entity_id, "relation": relation}
    async with conn.cursor(row_factory=dict_row) as cur:
        with db_span("active_edge", org=caller.org):
            await cur.execute(q.ACTIVE_EDGE, key)
            active = await cur.fetchone()
    claim = {"text": fact.fact, "confidence": fact.confidence, "causal_hint": fact.causal_hint}
    if active is not None and all(active[k] == v for k, v in claim.items()):
        ref = EdgeRef(fact_id=str(active["id"]), source=source.name, target=target.name, relation=relation)
        return ref, True
    supersedes = None
    if active is not None:
        supersedes = str(active["id"])
        await conn.execute(q.END_EDGE, {"now": now, "id": supersedes, "scope_id": scope.id})
    with db_span("insert_fact", org=caller.org):
        row = await (
            await conn.execute(
                q.INSERT_FACT,
                {**key, "episode_id": episode_id, "text": fact.fact, "confidence": fact.confidence,
                 "causal_hint": fact.causal_hint, "hint_origin": "write" if fact.causal_hint else None,
                 "now": now, "supersedes": supersedes, "agent_id": caller.agent_id, "tool": caller.tool,
                 "project": args.project, "session_id": args.session_id, "embedding": vector,
                 "tokens": count_tokens(fact.fact)},
            )
        ).fetchone()
    fact_id = str(row[0])  # type: ignore[index]
    edge = {"source": source.name, "target": target.name, "relation": relation}
    if active is None:
        await _audit(conn, caller, args, scope, kind="fact_created", fact_id=fact_id, after={**edge, **claim},
                     reason=f"{caller.agent_id} recorded that {fact.fact}")
        await _event(conn, caller, "fact.created", {"fact_id": fact_id, "scope": scope.stored_name})
    else:
        before = {k: active[k] for k in ("text", "confidence", "causal_hint")} | {"fact_id": supersedes}
        await _audit(conn, caller, args, scope, kind="fact_superseded", fact_id=fact_id, before=before,
                     after={**edge, **claim, "fact_id": fact_id},
                     reason=f"{caller.agent_id} changed the claim on ({source.name}, {relation}, {target.name})")
        await _event(conn, caller, "fact.superseded",
                     {"fact_id": fact_id, "supersedes": supersedes, "scope": scope.stored_name})
    ref = EdgeRef(fact_id=fact_id, source=source.name, target=target.name, relation=relation, supersedes=supersedes)
    return ref, False


async def _audit(
    conn: psycopg.AsyncConnection,
    caller: Caller,
    args: WriteEpisodeInput,
    scope: Scope,
    *,
    kind: str,
    reason: str,
    fact_id: str | None = None,
    entity_id: str | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> None:
    await conn.execute(
        q.INSERT_AUDIT,
        {"scope_id": scope.id, "kind": kind, "agent_id": caller.agent_id, "session_id": args.session_id,
         "tool": caller.tool, "fact_id": fact_id, "entity_id": entity_id,
         "before": Jsonb(before) if before is not None else None,
         "after": Jsonb(after) if after is not None else None, "reason": reason},
    )


async def _event(conn: psycopg.AsyncConnection, caller: Caller, kind: str, payload: dict[str, Any]) -> None:
    await conn.execute(q.INSERT_OUTBOX, (kind, json.dumps({"org": caller.org, **payload})))
