"""Erasure: `forget` (dry run or erase in one transaction), `forget_finish` (vacuum, event stream), `forget_log`.

The one audited exception to "a fact is never edited or deleted". A target is a fact (every
version of its triple), an entity (its aliases, every fact touching it or naming it) or a whole
scope. Its content is found in every place it lives: facts and their vectors, entities and
aliases, episodes (the write episodes that carried the facts, imported turns and documents whose
text holds it), documents, the read log and recall saves, the audit log (tombstoned: id, time,
kind and actor kept, texts replaced by the erasure's reason), deferred mentions, idempotency
answers, staged imports, consolidation's digests, their model-written abstracts and tier moves,
the outbox and the AGE graph mirror. Lexical statistics follow the deletes through migration
0013's triggers. Everything commits together or not at all; the erasure log (table `erasures`)
records ids and counts, never content.

After the commit `forget_finish` vacuums the touched tables (VACUUM cannot run in a transaction)
and deletes the event stream's messages about the erased rows; the CLI calls it right away, and it
may be called again for the same erasure.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg
from nats.js.errors import NotFoundError
from psycopg import sql
from psycopg.types.json import Jsonb

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound
from echo_memory.libs.core.contracts.forget import (
    MAX_IDS_SHOWN,
    Candidate,
    ErasureEntry,
    ForgetFinishInput,
    ForgetFinishResult,
    ForgetInput,
    ForgetLogInput,
    ForgetLogResult,
    ForgetResult,
    TargetKind,
)
from echo_memory.libs.core.contracts.subjects import EVENTS_STREAM, PREFIX
from echo_memory.libs.server.service.context import RequestContext
from echo_memory.libs.server.store import access
from echo_memory.libs.server.store.access import SOLO
from echo_memory.services.writes import forget_queries as q

ERASE = "erase memory"
SEARCH_LIMIT = 200
# Shorter texts would match nearly every turn and document: such a name is searched for nowhere
# but in its own rows (the dry run shows what goes).
MIN_NEEDLE = 3
# Every table an erasure may change, vacuumed after the commit so no old tuple stays readable.
TOUCHED_TABLES = ("facts", "entities", "entity_aliases", "episodes", "episode_distillations", "audit_log",
                  "reads", "read_results", "recall_saves", "documents", "document_ingestions", "outbox",
                  "idempotency", "import_staging", "deferred_mentions", "lexical_df", "lexical_stats", "digests",
                  "digest_abstracts", "tier_moves", "fact_tiers", "hot_facts", "hot_pending", "hot_edges",
                  "fact_token_totals")


@dataclass
class _Target:
    kind: TargetKind
    target_id: str
    scope_id: str
    scope_name: str
    scope_kind: str
    owner: str | None
    entities: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # the entity's name and aliases (entity target)


@dataclass
class _Plan:
    facts: list[str]
    entities: list[str]
    needles: list[str]
    episodes: list[str]  # deleted
    rewritten: list[str]  # write episodes that keep other facts' lines
    turns: list[str]  # turn_hash of each deleted imported turn
    document_hashes: list[str]  # content hashes of the deleted document versions
    reads: list[str]
    saves: list[str]
    audit: list[int]
    outbox: list[int]
    documents: list[str]
    digests: list[str]
    abstracts: list[str]
    counts: dict[str, int]

    def ids(self) -> dict[str, list[str]]:
        return {
            "facts": self.facts, "entities": self.entities, "episodes": self.episodes,
            "episodes_rewritten": self.rewritten, "reads_blanked": self.reads, "recall_saves": self.saves,
            "audit_log": [str(i) for i in self.audit], "outbox": [str(i) for i in self.outbox],
            "documents": self.documents, "turn_hashes": self.turns, "document_hashes": self.document_hashes,
            "digests": self.digests, "digest_abstracts": self.abstracts,
        }


def turn_hash(source: str, external_id: str) -> str:
    """An imported turn's origin as the erasure log keeps it: a digest of (source, external_id), no text."""
    return hashlib.sha256(f"{source}\n{external_id}".encode()).hexdigest()


async def forget(conn: psycopg.AsyncConnection, caller: Caller, args: ForgetInput) -> ForgetResult:
    """What a target's erasure takes away; with `confirm`, erase it and log the erasure.

    A search answers candidates (facts and entities holding the text) and changes nothing. Raises
    ScopeDenied unless the caller is the admin identity; InvalidArgument for no target, two
    targets, an empty name, a fact id that is not a UUID, an ambiguous alias, or `confirm` without
    a reason; NotFound for a fact, entity or scope that does not exist. Nothing changes on error.
    """
    access.require_admin(caller, ERASE)
    given = [name for name, value in (("fact", args.fact_id), ("entity", args.entity), ("scope", args.scope),
                                      ("search", args.search)) if value is not None]
    if len(given) != 1:
        raise InvalidArgument("give exactly one of fact, entity, scope or search"
                              + (f" (got {', '.join(given)})" if given else ""))
    if args.search is not None:
        return await _search(conn, args.search)
    if args.confirm and not args.reason:
        raise InvalidArgument("an erasure needs a reason (--reason); nothing was erased")
    target = await _target(conn, args)
    # Writers to the scope wait until the erasure commits, so nothing lands half-erased.
    await conn.execute(q.SCOPE_WRITE_LOCK, (target.scope_id,))
    plan = await _plan(conn, target)
    graph = "not touched (dry run)"
    erasure_id: str | None = None
    if args.confirm:
        erasure_id = str(uuid.uuid4())
        await _erase(conn, plan, target, erasure_id, args.reason)
        graph = await _erase_graph(conn, target, plan)
        await conn.execute(q.INSERT_ERASURE, {
            "erasure_id": erasure_id, "actor": caller.agent_id, "by": args.by or caller.agent_id,
            "reason": args.reason, "ref": args.ref, "kind": target.kind, "target_id": target.target_id,
            "scope_id": target.scope_id, "counts": Jsonb(plan.counts), "erased_ids": Jsonb(plan.ids()),
        })
    ids = plan.ids()
    return ForgetResult(dry_run=not args.confirm, target_kind=target.kind, scope=target.scope_name,
                        erasure_id=erasure_id, counts=plan.counts, graph_mirror=graph,
                        ids={kind: found[:MAX_IDS_SHOWN] for kind, found in ids.items()},
                        ids_truncated=[kind for kind, found in ids.items() if len(found) > MAX_IDS_SHOWN])


async def _search(conn: psycopg.AsyncConnection, term: str) -> ForgetResult:
    if len(term) < MIN_NEEDLE:
        raise InvalidArgument(f"a search term needs at least {MIN_NEEDLE} characters")
    params = {"term": term, "limit": SEARCH_LIMIT}
    found = [Candidate(kind="entity", id=r[0], scope=r[1], text=r[2])
             for r in await (await conn.execute(q.SEARCH_ENTITIES, params)).fetchall()]
    found += [Candidate(kind="fact", id=r[0], scope=r[1], text=r[2], current=r[3])
              for r in await (await conn.execute(q.SEARCH_FACTS, params)).fetchall()]
    return ForgetResult(dry_run=True, candidates=found)


async def _target(conn: psycopg.AsyncConnection, args: ForgetInput) -> _Target:
    if args.fact_id is not None:
        try:
            fact_id = str(uuid.UUID(args.fact_id))
        except ValueError:
            raise InvalidArgument(f"fact id '{args.fact_id[:64]}' is not a UUID") from None
        row = await (await conn.execute(q.FACT_BY_ID, (fact_id,))).fetchone()
        if row is None:
            raise NotFound(f"fact {fact_id} does not exist")
        return _Target("fact", fact_id, str(row[1]), row[2], row[3], row[4])
    if args.scope is not None:
        scope = await _scope(conn, args.scope)
        return _Target("scope", scope.target_id, scope.scope_id, scope.scope_name, scope.scope_kind, scope.owner)
    name = args.entity or ""
    if not name:
        raise InvalidArgument("the entity name is empty")
    scope = await _scope(conn, args.in_scope)
    params = {"scope_id": scope.scope_id, "name": name}
    ids = [str(r[0]) for r in await (await conn.execute(q.ENTITY_BY_NAME, params)).fetchall()]
    if not ids:
        ids = [str(r[0]) for r in await (await conn.execute(q.ENTITY_BY_ALIAS, params)).fetchall()]
    if not ids:
        raise NotFound(f"no entity named '{name}' in scope '{scope.scope_name}'")
    if len(ids) > 1:
        raise InvalidArgument(f"'{name}' is an alias of {len(ids)} entities ({', '.join(ids)}); "
                              "use --search and erase the facts one by one")
    names = [r[0] for r in await (await conn.execute(
        q.ENTITY_NAMES, {"scope_id": scope.scope_id, "entity_ids": ids})).fetchall()]
    return _Target("entity", ids[0], scope.scope_id, scope.scope_name, scope.scope_kind, scope.owner,
                   entities=ids, names=names)


async def _scope(conn: psycopg.AsyncConnection, name: str) -> _Target:
    if not name:
        raise InvalidArgument("the scope name is empty")
    row = await (await conn.execute(q.SCOPE_BY_NAME, (name,))).fetchone()
    if row is None:
        raise NotFound(f"scope '{name}' does not exist (solo scopes are named solo:<agent>)")
    return _Target("scope", str(row[0]), str(row[0]), row[1], row[2], row[3])


async def _ids(conn: psycopg.AsyncConnection, statement: str, params: dict[str, Any]) -> list[str]:
    return [str(r[0]) for r in await (await conn.execute(statement, params)).fetchall()]


async def _count(conn: psycopg.AsyncConnection, statement: str, params: dict[str, Any]) -> int:
    row = await (await conn.execute(statement, params)).fetchone()
    return int(row[0]) if row else 0


async def _plan(conn: psycopg.AsyncConnection, t: _Target) -> _Plan:
    """Every row the erasure takes away, found without changing anything."""
    whole = t.kind == "scope"
    base: dict[str, Any] = {"scope_id": t.scope_id, "whole_scope": whole}
    entities = t.entities
    if whole:
        entities = await _ids(conn, q.SCOPE_ENTITIES, base)
        seeds = await _ids(conn, q.SCOPE_FACTS, base)
    elif t.kind == "entity":
        needles = [n for n in t.names if len(n) >= MIN_NEEDLE]
        seeds = await _ids(conn, q.FACTS_OF_ENTITIES, {**base, "entity_ids": entities, "needles": needles})
    else:
        seeds = [t.target_id]
    facts = await _ids(conn, q.TRIPLES_OF, {**base, "fact_ids": seeds}) if seeds else []
    texts = [r[0] for r in await (await conn.execute(q.FACT_TEXTS, {**base, "fact_ids": facts})).fetchall()]
    needles = sorted({n for n in [*t.names, *texts] if len(n) >= MIN_NEEDLE})
    p: dict[str, Any] = {**base, "fact_ids": facts, "entity_ids": entities, "needles": needles}
    rows = await (await conn.execute(q.EPISODES, p)).fetchall()
    episodes = [str(r[0]) for r in rows if not r[1]]
    turns = sorted(turn_hash(r[2], r[3]) for r in rows if not r[1] and r[2] is not None and r[3] is not None)
    rewritten = [str(r[0]) for r in rows if r[1]]
    items = facts + episodes
    public = SOLO if t.scope_kind == "solo" else t.scope_name
    reads = await _ids(conn, q.READS, {**p, "items": items, "public_name": public,
                                       "owner": t.owner if t.scope_kind == "solo" else None})
    saves = await _ids(conn, q.SAVES, p)
    digests = await _ids(conn, q.DIGESTS, p)
    abstracts = await _ids(conn, q.ABSTRACTS, {**p, "digests": digests})
    audit = [int(r[0]) for r in await (await conn.execute(q.AUDIT_ROWS, {**p, "abstracts": abstracts})).fetchall()]
    found = await (await conn.execute(q.DOCUMENTS, p)).fetchall()
    documents = [str(r[0]) for r in found]
    document_hashes = sorted({r[1] for r in found})
    outbox = [int(r[0]) for r in await (await conn.execute(
        q.OUTBOX_ROWS, {**p, "saves": saves, "documents": documents})).fetchall()]
    counts = {
        "facts": len(facts), "entities": len(entities),
        "entity_aliases": await _count(conn, q.ALIAS_COUNT, p),
        "episodes": len(episodes), "episodes_rewritten": len(rewritten),
        "episode_distillations": await _count(conn, q.DISTILLATIONS_COUNT, {**p, "episode_ids": episodes}),
        "reads_blanked": len(reads), "read_results": await _count(conn, q.READ_RESULTS_COUNT, {"items": items}),
        "recall_saves": len(saves), "audit_log": len(audit), "outbox": len(outbox),
        "documents": len(documents), "idempotency": await _count(conn, q.IDEMPOTENCY_COUNT, p),
        "import_staging": await _count(conn, q.STAGING_COUNT, p),
        "deferred_mentions": await _count(conn, q.DEFERRED_COUNT, p),
        "digests": len(digests), "digest_abstracts": len(abstracts),
        "tier_moves": await _count(conn, q.TIER_MOVES_COUNT, p),
    }
    return _Plan(facts=facts, entities=entities, needles=needles, episodes=episodes, rewritten=rewritten, turns=turns,
                 document_hashes=document_hashes, reads=reads, saves=saves, audit=audit, outbox=outbox,
                 documents=documents, digests=digests, abstracts=abstracts, counts=counts)


async def _erase(conn: psycopg.AsyncConnection, plan: _Plan, t: _Target, erasure_id: str, reason: str) -> None:
    """Delete, blank and tombstone what the plan found, children before the rows they name."""
    p: dict[str, Any] = {
        "scope_id": t.scope_id, "whole_scope": t.kind == "scope", "fact_ids": plan.facts, "entity_ids": plan.entities,
        "needles": plan.needles, "episode_ids": plan.episodes, "rewritten": plan.rewritten, "reads": plan.reads,
        "items": plan.facts + plan.episodes, "saves": plan.saves, "audit": plan.audit, "outbox": plan.outbox,
        "documents": plan.documents, "digests": plan.digests, "abstracts": plan.abstracts,
        "erasure_id": erasure_id, "reason": reason,
    }
    for statement in (q.BLANK_READS, q.DELETE_READ_RESULTS, q.DELETE_SAVES, q.TOMBSTONE_AUDIT, q.DELETE_OUTBOX,
                      q.DELETE_IDEMPOTENCY, q.DELETE_STAGING, q.DELETE_DEFERRED, q.DELETE_ABSTRACTS, q.DELETE_DIGESTS,
                      q.DELETE_TIER_MOVES, q.DELETE_FACT_TIERS, q.DELETE_FACTS,
                      q.REWRITE_EPISODES, q.UNLINK_EPISODES, q.DELETE_DISTILLATIONS, q.DELETE_EPISODES,
                      q.DELETE_ALIASES, q.DELETE_ENTITY_MERGES, q.DELETE_ENTITIES, q.DELETE_INGESTIONS,
                      q.DELETE_DOCUMENTS):
        await conn.execute(statement, p)


async def _erase_graph(conn: psycopg.AsyncConnection, t: _Target, plan: _Plan) -> str:
    """Remove the erased facts' edges and entities' vertices from the AGE mirror, when there is one."""
    if await (await conn.execute(q.AGE_INSTALLED)).fetchone() is None:
        return "no graph mirror (the database has no AGE)"
    for statement in q.AGE_SESSION:
        await conn.execute(statement)
    if await (await conn.execute(q.AGE_GRAPH_EXISTS)).fetchone() is None:
        return "no graph mirror yet"
    if t.kind == "scope":
        await conn.execute(q.AGE_DELETE_SCOPE, (json.dumps({"scope": t.scope_name}),))
        return f"every vertex and edge of scope '{t.scope_name}' removed"
    for fact_id in plan.facts:
        await conn.execute(q.AGE_DELETE_FACT_EDGE, (json.dumps({"id": fact_id}),))
    for entity_id in plan.entities:
        await conn.execute(q.AGE_DELETE_ENTITY, (json.dumps({"id": entity_id}),))
    return f"{len(plan.facts)} edges and {len(plan.entities)} vertices removed"


async def forget_log(conn: psycopg.AsyncConnection, caller: Caller, args: ForgetLogInput) -> ForgetLogResult:
    """The erasure log, newest first (empty when nothing was ever erased); ScopeDenied unless admin."""
    access.require_admin(caller, ERASE)
    rows = await (await conn.execute(q.ERASURE_LOG, (args.limit,))).fetchall()
    return ForgetLogResult(erasures=[
        ErasureEntry(id=r[0], erased_at=r[1], actor=r[2], erased_by=r[3], reason=r[4], ref=r[5], target_kind=r[6],
                     target_id=r[7], scope=r[8], counts=r[9], finished_at=r[10])
        for r in rows
    ])


async def forget_finish(rc: RequestContext, args: ForgetFinishInput) -> ForgetFinishResult:
    """Vacuum the touched tables and delete the event stream's messages naming the erased rows.

    Runs after `forget` committed (VACUUM cannot run inside a transaction, so it uses a connection
    of its own). Idempotent. Raises ScopeDenied unless admin; NotFound for an unknown erasure id.
    """
    access.require_admin(rc.caller, ERASE)
    try:
        erasure_id = str(uuid.UUID(args.erasure_id))
    except ValueError:
        raise InvalidArgument(f"erasure id '{args.erasure_id[:64]}' is not a UUID") from None
    row = await (await rc.conn.execute(q.ERASURE_BY_ID, (erasure_id,))).fetchone()
    if row is None:
        raise NotFound(f"no erasure {erasure_id}")
    erased: dict[str, list[str]] = row[0]
    scanned, deleted, stream = await _clean_stream(rc, erased, row[1] if row[2] == "scope" else None)
    pool = await rc.service.databases.pool(rc.org)
    async with pool.connection() as conn:
        await conn.set_autocommit(True)
        try:
            for table in TOUCHED_TABLES:
                await conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))
        finally:
            await conn.set_autocommit(False)  # the pool hands this connection to the next request as it was
    await rc.conn.execute(q.MARK_FINISHED, (erasure_id,))
    return ForgetFinishResult(erasure_id=erasure_id, vacuumed=list(TOUCHED_TABLES), events_scanned=scanned,
                              events_deleted=deleted, stream=stream)


def _names_erased(body: bytes, ids: set[str], scope_id: str | None) -> bool:
    """True when an event's payload names an erased row (or the erased scope)."""
    try:
        payload = json.loads(body).get("payload", {})
    except (ValueError, AttributeError):
        return False
    if not isinstance(payload, dict):
        return False
    if scope_id is not None and payload.get("scope_id") == scope_id:
        return True
    return any(isinstance(v, str) and v in ids for v in payload.values())


async def _clean_stream(rc: RequestContext, erased: dict[str, list[str]], scope_id: str | None) -> tuple[int, int, str]:
    """Scan the org's events in ECHO_EVENTS and delete each message naming an erased row."""
    ids = {i for key in ("facts", "recall_saves", "documents", "entities", "episodes") for i in erased.get(key, [])}
    js = rc.service.broker.connection.jetstream()
    try:
        info = await js.stream_info(EVENTS_STREAM)
    except NotFoundError:
        return 0, 0, "no event stream"
    subject = f"{PREFIX}.{rc.org}.events.>"
    scanned = deleted = 0
    seq = info.state.first_seq
    last = info.state.last_seq
    while seq <= last:
        try:
            msg = await js.get_msg(EVENTS_STREAM, seq=seq, subject=subject, next=True)
        except NotFoundError:
            break  # no message of this org at or after seq
        if msg.seq is None or msg.seq > last:
            break
        scanned += 1
        if _names_erased(msg.data or b"", ids, scope_id):
            await js.delete_msg(EVENTS_STREAM, msg.seq)
            deleted += 1
        seq = msg.seq + 1
    return scanned, deleted, f"{deleted} of {scanned} events of org '{rc.org}' deleted"
