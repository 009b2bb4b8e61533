"""query_memory: scope and validity first, then channels, fusion, and the read log.

Every returned item's `score` is the cosine between the query and the item, whatever channel
found it; fusion only decides the order. Every read is logged in the same transaction.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.config.retrieval import RetrievalSettings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.common import Provenance
from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.core.contracts.instants import parse_span
from echo_memory.libs.core.contracts.query import (
    Channel,
    ItemKind,
    MemoryItem,
    PendingDocumentHit,
    QueryMemoryInput,
    QueryMemoryResult,
)
from echo_memory.libs.core.secrets import redact_secrets
from echo_memory.libs.server.embed import MiniLM, settle
from echo_memory.libs.server.store import embedding_models
from echo_memory.libs.server.store.access import Scope, public_name, resolve_read_scopes
from echo_memory.libs.server.telemetry import db_span, steps
from echo_memory.services.retrieval import channels as ch
from echo_memory.services.retrieval import queries as q
from echo_memory.services.retrieval.demotion import demote_flagged
from echo_memory.services.retrieval.fusion import channels_of, fuse
from echo_memory.services.retrieval.gates import GateOutcome, Ranked, apply_gates
from echo_memory.services.retrieval.request import Search

# Pending project files shown beside the results: a few, so an agent notices them without the
# files crowding out facts; the query's first words only, so a long question stays one cheap scan.
PENDING_DOCUMENT_HITS = 3
PENDING_DOCUMENT_WORDS = 32
# An `about` or `digest` answer without a query has nothing to compare its facts with.
UNSCORED_NOTE = "not scored ({how}): score is null and results are newest first"

# Opens a second, read-only connection to the same org database (see `_candidates`).
SideConnection = Callable[[], AbstractAsyncContextManager[psycopg.AsyncConnection]]


async def query_memory(
    conn: psycopg.AsyncConnection,
    caller: Caller,
    args: QueryMemoryInput,
    embedder: MiniLM,
    settings: RetrievalSettings | None = None,
    side: SideConnection | None = None,
) -> QueryMemoryResult:
    """Ranked facts (and evidence) for the query.

    Returns an empty `results` list with a `note` saying why (unknown `about` name, unconnected
    pair, nothing visible in the scope at `as_of`, nothing relevant: no item shares a word or
    entity with the query and the closest is far from it). A search leaves out filler far below
    its best match and near-duplicates of better-ranked items, and its `note` counts them.
    Raises InvalidArgument for a missing query or bad `about`; ScopeDenied/NotFound for scopes
    the token may not read or that do not exist.
    `side`, when given, opens a second connection so two groups of channels run at once; the
    read log is always written on `conn`, in the request's transaction.
    """
    settings = settings or RetrievalSettings()  # the defaults; the service passes its configured section
    # The last instant of the named second (minute, day): a write during it is visible as_of it.
    as_of = parse_span(args.as_of, "as_of").last if args.as_of is not None else None
    query = (args.query or "").strip()
    about = [name.strip() for name in (args.about or [])]
    if any(not name for name in about):
        raise InvalidArgument("about: entity names must not be empty")
    if not query and not args.digest and not about:
        raise InvalidArgument("query is required unless digest is true or about names an entity")
    # The model runs in a worker thread (onnxruntime releases the GIL) while the statements that
    # do not need the query vector run: scopes, corpus sizes, the graph neighbourhood.
    embedding_job = asyncio.create_task(asyncio.to_thread(_embed_one, embedder, query)) if query else None
    try:
        with steps.step("resolve_scopes"):
            scopes = await resolve_read_scopes(conn, caller, args.scope)
        search = Search(
            caller=caller, scopes=tuple(scopes), query=query,
            as_of=as_of, at=as_of if as_of is not None else datetime.now(tz=UTC),
            # A look into the past sees every tier, as `about`, `why` and export do.
            tier=args.tier if as_of is None else "all",
            top_k=args.top_k, include_episodes=args.include_episodes, settings=settings,
            model=embedder.name, vector=embedding_job,
        )
        note: str | None = None
        gate_note: str | None = None
        lexical_note: str | None = None
        model_note: str | None = None
        ranked: list[Ranked] = []
        searched = False
        if about:
            vector = await search.embedding() if search.vector is not None else None
            rows, note = await _about_rows(conn, search.binds(embedding=vector, limit=args.top_k), about)
            ranked = _demoted([_unranked(r, Channel.ABOUT) for r in rows])
        elif args.digest and not query:
            async with conn.cursor(row_factory=dict_row) as cur:
                with db_span("digest_facts", org=caller.org):
                    await cur.execute(q.DIGEST_FACTS, search.binds(limit=args.top_k))
                    ranked = _demoted([_unranked(r, Channel.DIGEST) for r in await cur.fetchall()])
        elif search.scope_ids and search.vector is not None:
            searched = True
            ranked, gated, lexical_note, model_note = await _search(conn, search, side)
            if gated.nothing_relevant:
                note = gated.note()
            else:
                gate_note = gated.note()
    finally:
        if embedding_job is not None:
            await settle(embedding_job)

    lexical_used: Literal["bm25", "ts_rank"] | None = None
    if searched and Channel.LEXICAL in settings.channels:
        lexical_used = "ts_rank" if lexical_note else "bm25"
    items, total, cut = _take(ranked[: args.top_k], args.max_tokens)
    if not items and note is None:
        note = _empty_note(scopes, args)
    if cut:
        note = f"stopped at {total} tokens (max_tokens={args.max_tokens}); {cut} more results were left out"
    if items and all(i.score is None for i in items):
        unscored = UNSCORED_NOTE.format(how="about without a query" if about else "digest")
        note = f"{note}; {unscored}" if note else unscored
    for extra in (gate_note, lexical_note, model_note):
        if extra:
            note = f"{note}; {extra}" if note else extra
    documents: list[PendingDocumentHit] = []
    if query and not about and as_of is None and args.include_episodes:
        documents = await _pending_documents(conn, caller, query)
    with steps.step("read_log"):
        read_id = await _log_read(conn, search, args.query, items)
    return QueryMemoryResult(
        results=items, pending_documents=documents, read_id=read_id, total_tokens=total,
        scopes=[s.name for s in scopes], note=note, lexical=lexical_used,
    )


async def _pending_documents(conn: psycopg.AsyncConnection, caller: Caller, query: str) -> list[PendingDocumentHit]:
    """Registered project files matching any word of `query` that `caller` has not ingested, best first."""
    words = re.findall(r"\w+", query)[:PENDING_DOCUMENT_WORDS]
    if not words:
        return []
    async with conn.cursor(row_factory=dict_row) as cur:
        with db_span("pending_document_matches", org=caller.org):
            await cur.execute(q.PENDING_DOCUMENT_MATCHES, {
                "words": " or ".join(words), "agent_id": caller.agent_id, "limit": PENDING_DOCUMENT_HITS})
            rows = await cur.fetchall()
    return [PendingDocumentHit(document_id=str(r["id"]), project=r["project"], path=r["path"],
                               content_hash=r["content_hash"], size=r["size"], excerpt=r["excerpt"]) for r in rows]


async def _search(
    conn: psycopg.AsyncConnection, search: Search, side: SideConnection | None
) -> tuple[list[Ranked], GateOutcome, str | None, str | None]:
    """Run every switched-on channel, fuse, hydrate, and keep the top_k rows that pass the gates.

    Returns the ranked rows, what the quality gates left out, the lexical fallback note and the
    embedding-model note (scopes whose vectors another model made), each None when there is
    nothing to say.
    """
    on = search.channels
    pool, fallbacks, model_note = await _candidates(conn, search, side)
    with steps.step("fusion"):
        fused = fuse(pool, search.settings.fusion, on)[: gate_depth(search.top_k)]
    with steps.step("hydrate"):
        rows = await _hydrate(conn, search, fused)
    ranked = _demoted([Ranked(rows[c.id], c.kind, channels_of(c, on), c.cos) for c, _ in fused if c.id in rows])
    kept, gated = apply_gates(ranked, search.settings.gates, search.top_k, _neighbour_cosines(fused, pool))
    lexical_note = (
        "lexical channel used the ts_rank fallback (" + "; ".join(fallbacks) + ")" if fallbacks else None
    )
    return kept, gated, lexical_note, model_note


def _unranked(row: dict[str, Any], how: Channel) -> Ranked:
    """A fact of an `about` or `digest` answer, in the order its statement returned it."""
    return Ranked(row, ItemKind.FACT, (how,), row.get("score"))


def _demoted(ranked: list[Ranked]) -> list[Ranked]:
    """Instruction-like rows after unflagged rows of comparable cosine (demotion.py); the rest as ranked."""
    flagged = {item.id for item in ranked if item.row.get("flags")}
    return demote_flagged(ranked, flagged, lambda item: (item.id, item.score or 0.0))


def _neighbour_cosines(fused: list[tuple[ch.Candidate, float]], pool: ch.Pool) -> dict[str, float]:
    """Each fused candidate's best cosine among its session neighbours (only the neighbour channel links them)."""
    return {c.id: max(pool[n].cos for n in c.neighbours) for c, _ in fused if c.neighbours}


def gate_depth(top_k: int) -> int:
    """How deep the fused ranking is hydrated, so items the gates leave out are back-filled."""
    return top_k + max(10, top_k)


async def _candidates(
    conn: psycopg.AsyncConnection, search: Search, side: SideConnection | None
) -> tuple[ch.Pool, list[str], str | None]:
    """Every switched-on channel's candidates in one pool, every candidate with its cosine.

    Returns the pool (empty when nothing matches), why the lexical channel fell back to ts_rank
    per corpus (empty when it did not), and the embedding-model note (None when there is none).

    The query is still being embedded when this starts: corpus sizes (with the HNSW settings),
    the graph neighbourhood of the entities the query names and its PageRank are done meanwhile.
    Once the vector is ready, dense facts, dense episodes and the cosines of the graph's other
    facts run on `conn`, and the lexical channel on the `side` connection at the same time
    (without one, in turn).
    """
    on = search.channels
    with steps.step("corpus_sizes"):
        sizes, model_note = await _before_vector(conn, search)
    facts = sizes[ItemKind.FACT]
    pool: ch.Pool = {}
    fallbacks: list[str] = []

    async def wait_vector() -> None:
        # A task's result can be awaited any number of times; both groups wait on the same one,
        # and the channels' own awaits of it then return at once.
        with steps.step("wait_query_vector"):
            await search.embedding()

    async def dense_and_graph(c: psycopg.AsyncConnection) -> None:
        graph: list[tuple[float, str]] = []
        if Channel.GRAPH in on and facts.docs > 0:
            with steps.step("channel_graph"):
                named = await ch.named_entities(c, search)
                edges = await ch.graph_neighbourhood(c, search, named)
                graph = ch.graph_scores(edges, named, limit=search.limit)  # still no vector needed
        if Channel.DENSE in on:
            await wait_vector()
            with steps.step("channel_dense"):
                for kind in search.kinds:
                    await ch.dense(c, pool, search, sizes[kind])
        ch.graph(pool, graph)
        # The graph's facts that dense did not find get their cosines here, while the lexical
        # channel is still running on the other connection (its rows carry their cosines).
        await wait_vector()
        with steps.step("graph_cosines"):
            await ch.fill_cosines(c, pool, search)

    async def lexical_channel(c: psycopg.AsyncConnection) -> None:
        for kind in search.kinds:
            corpus = sizes[kind]
            if Channel.LEXICAL in on:
                mode = ch.lexical_mode(corpus, search.settings.lexical_bm25)
                if mode.reason:
                    fallbacks.append(f"{corpus.name}: {mode.reason}")
                if mode.mode == "bm25" and corpus.docs == 0:
                    continue  # an empty corpus: nothing to match, so skip the round trip
                await wait_vector()
                with steps.step("channel_lexical"):
                    await ch.lexical(c, pool, search, corpus)

    if side is None:
        await dense_and_graph(conn)
        await lexical_channel(conn)
    else:
        async with side() as other:
            # Both run to the end even when one fails, so no statement is left running on a
            # connection that goes back to the pool; then the first failure is raised.
            outcomes = await asyncio.gather(dense_and_graph(conn), lexical_channel(other),
                                            return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
    await wait_vector()
    # Without current digests (a store no run has placed) every fact is hot: nothing to expand.
    if search.hot and facts.docs > 0 and facts.has_digests:
        with steps.step("channel_via_digest"):
            members = await ch.via_digests(conn, pool, search)
        if Channel.LEXICAL in on:
            with steps.step("lexical_of_members"):
                unscored = [m for m in members if Channel.LEXICAL not in pool[m].channels]
                await ch.lexical_of(conn, pool, search, facts, unscored)
    # A no-op unless some candidate still has no cosine; fusion must never rank a NaN.
    with steps.step("fill_cosines"):
        await ch.fill_cosines(conn, pool, search)
    if Channel.NEIGHBOUR in on and search.include_episodes:
        with steps.step("channel_neighbour"):
            await ch.neighbours(conn, pool, search)

    return pool, fallbacks, model_note


async def _before_vector(
    conn: psycopg.AsyncConnection, search: Search
) -> tuple[dict[ItemKind, ch.Corpus], str | None]:
    """The corpora's sizes and the embedding-model note, and the HNSW scan settings set: one round trip.

    The note says which scopes read hold vectors of another embedding model (None when none
    do; see libs/server/store/embedding_models). The three statements go out in one psycopg pipeline.
    """
    params = {"scope_ids": search.scope_ids, "model": search.model}
    async with conn.pipeline():
        sizes = await conn.execute(q.CORPUS_SIZES, params)
        models = await conn.execute(embedding_models.OTHER_MODELS, params)
        await conn.execute(q.HNSW_SETTINGS)
    other = [(public_name(r[0]), str(r[1])) for r in await models.fetchall()]
    return ch.corpus_sizes(await sizes.fetchall()), embedding_models.mismatch_note(other, search.model)


async def _hydrate(
    conn: psycopg.AsyncConnection, search: Search, fused: list[tuple[ch.Candidate, float]]
) -> dict[str, dict[str, Any]]:
    """Full rows (text, provenance) of the few items that survived fusion, keyed by id."""
    found: dict[str, dict[str, Any]] = {}
    cursors: list[psycopg.AsyncCursor[dict[str, Any]]] = []
    async with conn.pipeline():  # facts and episodes in one round trip
        for kind, sql in ((ItemKind.FACT, q.HYDRATE_FACTS), (ItemKind.EPISODE, q.HYDRATE_EPISODES)):
            ids = [c.id for c, _ in fused if c.kind == kind]
            if ids:
                cursor = conn.cursor(row_factory=dict_row)
                await cursor.execute(sql, {"scope_ids": search.scope_ids, "ids": ids})
                cursors.append(cursor)
    for cursor in cursors:
        for row in await cursor.fetchall():
            found[str(row["id"])] = row
        await cursor.close()
    return found


async def _about_rows(
    conn: psycopg.AsyncConnection, params: dict[str, Any], names: list[str]
) -> tuple[list[dict[str, Any]], str | None]:
    """Edges touching one entity, or between two (either direction); empty with a note when not."""
    ids: list[list[Any]] = []
    async with conn.cursor(row_factory=dict_row) as cur:
        for name in names:
            await cur.execute(q.ABOUT_ENTITIES, {**params, "name": name})
            found = [r["id"] for r in await cur.fetchall()]
            if not found:
                return [], f"no entity is named '{name}' (exact name or alias, case-insensitive)"
            ids.append(found)
        first, second = ids[0], ids[1] if len(ids) > 1 else []
        await cur.execute(q.ABOUT_FACTS, {**params, "first": first, "second": second})
        rows = list(await cur.fetchall())
    if not rows and second:
        return [], f"'{names[0]}' and '{names[1]}' are not connected by any fact"
    if not rows:
        return [], f"'{names[0]}' has no facts in force at that time"
    return rows, None


def _take(ranked: list[Ranked], max_tokens: int | None) -> tuple[list[MemoryItem], int, int]:
    """The answer's items in rank order, stopping before the one that would pass `max_tokens`.

    Returns the items, their tokens, and how many ranked rows were left out for the budget.
    """
    items: list[MemoryItem] = []
    total = 0
    for index, item in enumerate(ranked):
        row, score = item.row, item.score
        tokens = int(row["token_count"] or 0)
        if max_tokens is not None and total + tokens > max_tokens:
            return items, total, len(ranked) - index
        total += tokens
        items.append(
            MemoryItem(
                kind=item.kind,
                id=str(row["id"]),
                text=row["text"],
                score=round(float(score), 6) if score is not None and not np.isnan(score) else None,
                rank=len(items) + 1,
                matched=list(item.matched),
                tokens=tokens,
                provenance=Provenance(
                    agent_id=row["agent_id"], tool=row["tool"], project=row["project"],
                    session_id=row["session_id"], written_at=row["written_at"], valid_from=row["t_valid"],
                    valid_until=row["t_invalid"], scope=public_name(row["scope_name"]),
                ),
                source=row["source"], target=row["target"], relation=row["relation"],
                flags=list(row.get("flags") or []),
            )
        )
    return items, total, 0


def _empty_note(scopes: list[Scope], args: QueryMemoryInput) -> str:
    names = ", ".join(s.name for s in scopes)
    when = f" as of {args.as_of}" if args.as_of is not None else ""
    return f"nothing in scope {names}{when} matches; memory may simply not hold this yet"


async def _log_read(
    conn: psycopg.AsyncConnection, search: Search, query: str | None, items: list[MemoryItem]
) -> str:
    """Every read is logged in the same request: record_recall_save and provenance depend on it.

    `query` is the one asked, unstripped. The logged query has each secret replaced by
    `[redacted <kind>]`; the search used the original.
    """
    caller = search.caller
    with db_span("insert_read", org=caller.org):
        row = await (
            await conn.execute(
                q.INSERT_READ,
                {"agent_id": caller.agent_id, "tool": caller.tool,
                 "query": redact_secrets(query) if query else query,
                 "scopes": [s.stored_name for s in search.scopes], "as_of": search.as_of,
                 "tokens": sum(i.tokens for i in items),
                 "item_ids": [i.id for i in items], "kinds": [i.kind.value for i in items],
                 # read_results.score is NOT NULL: an unscored item (about/digest without a query) is logged as 0.
                 "ranks": [i.rank for i in items], "scores": [0.0 if i.score is None else i.score for i in items]},
            )
        ).fetchone()
    return str(row[0])  # type: ignore[index]


def _embed_one(embedder: MiniLM, query: str) -> np.ndarray:
    """The query's vector, timed as "embed_query" when a profiler collects (runs in a worker thread)."""
    with steps.step("embed_query"):
        return embedder.embed_one(query)


__all__ = ["query_memory"]
