"""query_memory: scope and validity first, then channels, fusion, and the read log.

Every returned item's `score` is the cosine between the query and the item, whatever channel
found it; fusion only decides the order. Every read is logged in the same transaction.
"""

from __future__ import annotations

import asyncio
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
from echo_memory.libs.core.contracts.query import MemoryItem, QueryMemoryInput, QueryMemoryResult
from echo_memory.libs.core.secrets import redact_secrets
from echo_memory.libs.server.embed import MiniLM, settle
from echo_memory.libs.server.store import embedding_models
from echo_memory.libs.server.store.access import Scope, public_name, resolve_read_scopes
from echo_memory.libs.server.telemetry import db_span, steps
from echo_memory.services.retrieval import channels as ch
from echo_memory.services.retrieval import queries as q
from echo_memory.services.retrieval.fusion import channels_of, fuse
from echo_memory.services.retrieval.gates import GateOutcome, Ranked, apply_gates

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
        scope_ids = [s.id for s in scopes if s.id is not None]
        at = as_of if as_of is not None else datetime.now(tz=UTC)
        # A look into the past sees every tier, as `about`, `why` and export do.
        tier = args.tier if as_of is None else "all"
        params: dict[str, Any] = {"scope_ids": scope_ids, "at": at, "embedding": None, "query": query, "tier": tier}
        note: str | None = None
        gate_note: str | None = None
        lexical_note: str | None = None
        model_note: str | None = None
        ranked: list[tuple[dict[str, Any], str, list[str]]] = []  # (row with score, kind, matched)
        searched = False
        if about:
            params["embedding"] = await embedding_job if embedding_job is not None else None
            rows, note = await _about_rows(conn, {**params, "limit": args.top_k}, about)
            ranked = [(r, "fact", ["about"]) for r in rows]
        elif args.digest and not query:
            async with conn.cursor(row_factory=dict_row) as cur:
                with db_span("digest_facts", org=caller.org):
                    await cur.execute(q.DIGEST_FACTS, {**params, "limit": args.top_k})
                    ranked = [(r, "fact", ["digest"]) for r in await cur.fetchall()]
        elif scope_ids and embedding_job is not None:
            searched = True
            ranked, gated, lexical_note, model_note = await _search(
                conn, caller, args, settings, params, embedding_job, side, embedder.name
            )
            if gated.nothing_relevant:
                note = gated.note()
            else:
                gate_note = gated.note()
    finally:
        if embedding_job is not None:
            await settle(embedding_job)

    lexical_used: Literal["bm25", "ts_rank"] | None = None
    if searched and "lexical" in settings.channels:
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
    with steps.step("read_log"):
        read_id = await _log_read(conn, caller, args, scopes, items, total, as_of)
    return QueryMemoryResult(
        results=items, read_id=read_id, total_tokens=total, scopes=[s.name for s in scopes], note=note,
        lexical=lexical_used,
    )


async def _search(
    conn: psycopg.AsyncConnection,
    caller: Caller,
    args: QueryMemoryInput,
    settings: RetrievalSettings,
    params: dict[str, Any],
    embedding_job: asyncio.Task[np.ndarray],
    side: SideConnection | None,
    model: str,
) -> tuple[list[Ranked], GateOutcome, str | None, str | None]:
    """Run every switched-on channel, fuse, hydrate, and keep the top_k rows that pass the gates.

    Returns the ranked rows, what the quality gates left out, the lexical fallback note and the
    embedding-model note (scopes whose vectors another model made), each None when there is
    nothing to say.
    """
    on = set(settings.channels)
    pool, fallbacks, model_note = await _candidates(conn, caller, args, settings, params, embedding_job, side, model)
    with steps.step("fusion"):
        fused = fuse(pool, settings.fusion, on)[: gate_depth(args.top_k)]
    with steps.step("hydrate"):
        rows = await _hydrate(conn, params["scope_ids"], fused)
    ranked = [(rows[c.id], c.kind, channels_of(c, on)) for c, _ in fused if c.id in rows]
    kept, gated = apply_gates(ranked, settings.gates, args.top_k, _neighbour_cosines(fused, pool))
    lexical_note = (
        "lexical channel used the ts_rank fallback (" + "; ".join(fallbacks) + ")" if fallbacks else None
    )
    return kept, gated, lexical_note, model_note


def _neighbour_cosines(fused: list[tuple[ch.Candidate, float]], pool: ch.Pool) -> dict[str, float]:
    """Each fused candidate's best cosine among its session neighbours (only the neighbour channel links them)."""
    return {c.id: max(pool[n].cos for n in c.neighbours) for c, _ in fused if c.neighbours}


def gate_depth(top_k: int) -> int:
    """How deep the fused ranking is hydrated, so items the gates leave out are back-filled."""
    return top_k + max(10, top_k)


async def _candidates(
    conn: psycopg.AsyncConnection,
    caller: Caller,
    args: QueryMemoryInput,
    settings: RetrievalSettings,
    params: dict[str, Any],
    embedding_job: asyncio.Task[np.ndarray],
    side: SideConnection | None,
    model: str,
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
    on = set(settings.channels)
    limit = max(settings.candidates, args.top_k)
    scope_ids = params["scope_ids"]
    with steps.step("corpus_sizes"):
        sizes, model_note = await _before_vector(conn, scope_ids, model)
    kinds = ["fact", "episode"] if args.include_episodes else ["fact"]
    pool: ch.Pool = {}
    fallbacks: list[str] = []

    def docs(corpus: str) -> int:
        return sizes[corpus].docs if corpus in sizes else 0

    async def with_vector() -> dict[str, Any]:
        # A task's result can be awaited any number of times; both groups wait on the same one.
        with steps.step("wait_query_vector"):
            vector = await embedding_job
        return {**params, "embedding": vector, "limit": limit}

    async def dense_and_graph(c: psycopg.AsyncConnection) -> None:
        graph: list[tuple[float, str]] = []
        if "graph" in on and docs("facts") > 0:
            with steps.step("channel_graph"):
                named = await ch.named_entities(c, params, org=caller.org)
                edges = await ch.graph_neighbourhood(c, params, named, edge_cap=settings.graph_edge_cap,
                                                     org=caller.org)
                graph = ch.graph_scores(edges, named, limit=limit)  # still no vector needed
        if "dense" in on:
            dense_params = await with_vector()
            with steps.step("channel_dense"):
                await ch.dense(c, pool, dense_params, "fact", use_hnsw=docs("facts") > settings.hnsw_threshold,
                               org=caller.org)
                if "episode" in kinds:
                    await ch.dense(c, pool, dense_params, "episode",
                                   use_hnsw=docs("episodes") > settings.hnsw_threshold, org=caller.org)
        ch.graph(pool, graph)
        # The graph's facts that dense did not find get their cosines here, while the lexical
        # channel is still running on the other connection (its rows carry their cosines).
        cosine_params = await with_vector()
        with steps.step("graph_cosines"):
            await ch.fill_cosines(c, pool, cosine_params, org=caller.org)

    async def lexical_channel(c: psycopg.AsyncConnection) -> None:
        for kind in kinds:
            corpus = "facts" if kind == "fact" else "episodes"
            if "lexical" in on:
                mode = ch.lexical_mode(sizes.get(corpus), corpus, settings.lexical_bm25)
                if mode.reason:
                    fallbacks.append(f"{corpus}: {mode.reason}")
                if mode.mode == "bm25" and docs(corpus) == 0:
                    continue  # an empty corpus: nothing to match, so skip the round trip
                lexical_params = await with_vector()
                with steps.step("channel_lexical"):
                    await ch.lexical(c, pool, lexical_params, kind, mode, docs=docs(corpus), org=caller.org)

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
    channel_params = await with_vector()
    if params.get("tier") == "hot" and docs("facts") > 0:
        with steps.step("channel_via_digest"):
            await ch.via_digests(conn, pool, channel_params, org=caller.org)
    # A no-op unless some candidate still has no cosine; fusion must never rank a NaN.
    with steps.step("fill_cosines"):
        await ch.fill_cosines(conn, pool, channel_params, org=caller.org)
    if "neighbour" in on and args.include_episodes:
        with steps.step("channel_neighbour"):
            await ch.neighbours(conn, pool, channel_params, org=caller.org)

    return pool, fallbacks, model_note


async def _before_vector(
    conn: psycopg.AsyncConnection, scope_ids: list[str], model: str
) -> tuple[dict[str, ch.Corpus], str | None]:
    """The corpora's sizes and the embedding-model note, and the HNSW scan settings set: one round trip.

    The note says which scopes read hold vectors of another embedding model (None when none
    do; see libs/server/store/embedding_models). The three statements go out in one psycopg pipeline.
    """
    params = {"scope_ids": scope_ids, "model": model}
    async with conn.pipeline():
        sizes = await conn.execute(q.CORPUS_SIZES, params)
        models = await conn.execute(embedding_models.OTHER_MODELS, params)
        await conn.execute(q.HNSW_SETTINGS)
    other = [(public_name(r[0]), str(r[1])) for r in await models.fetchall()]
    return ch.corpus_sizes(await sizes.fetchall()), embedding_models.mismatch_note(other, model)


async def _hydrate(
    conn: psycopg.AsyncConnection, scope_ids: list[str], fused: list[tuple[ch.Candidate, float]]
) -> dict[str, dict[str, Any]]:
    """Full rows (text, provenance) of the few items that survived fusion, keyed by id."""
    found: dict[str, dict[str, Any]] = {}
    cursors: list[psycopg.AsyncCursor[dict[str, Any]]] = []
    async with conn.pipeline():  # facts and episodes in one round trip
        for kind, sql in (("fact", q.HYDRATE_FACTS), ("episode", q.HYDRATE_EPISODES)):
            ids = [c.id for c, _ in fused if c.kind == kind]
            if ids:
                cursor = conn.cursor(row_factory=dict_row)
                await cursor.execute(sql, {"scope_ids": scope_ids, "ids": ids})
                cursors.append(cursor)
    for cursor in cursors:
        for row in await cursor.fetchall():
            found[str(row["id"])] = row
        await cursor.close()
    for cand, _ in fused:
        if cand.id in found:
            found[cand.id]["score"] = cand.cos
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


def _take(
    rows: list[tuple[dict[str, Any], str, list[str]]], max_tokens: int | None
) -> tuple[list[MemoryItem], int, int]:
    items: list[MemoryItem] = []
    total = 0
    for index, (row, kind, matched) in enumerate(rows):
        tokens = int(row["token_count"] or 0)
        if max_tokens is not None and total + tokens > max_tokens:
            return items, total, len(rows) - index
        total += tokens
        score = row.get("score")
        items.append(
            MemoryItem(
                kind=kind,  # type: ignore[arg-type]
                id=str(row["id"]),
                text=row["text"],
                score=round(float(score), 6) if score is not None and not np.isnan(score) else None,
                rank=len(items) + 1,
                matched=matched,
                tokens=tokens,
                provenance=Provenance(
                    agent_id=row["agent_id"], tool=row["tool"], project=row["project"],
                    session_id=row["session_id"], written_at=row["written_at"], valid_from=row["t_valid"],
                    valid_until=row["t_invalid"], scope=public_name(row["scope_name"]),
                ),
                source=row["source"], target=row["target"], relation=row["relation"],
            )
        )
    return items, total, 0


def _empty_note(scopes: list[Scope], args: QueryMemoryInput) -> str:
    names = ", ".join(s.name for s in scopes)
    when = f" as of {args.as_of}" if args.as_of is not None else ""
    return f"nothing in scope {names}{when} matches; memory may simply not hold this yet"


async def _log_read(
    conn: psycopg.AsyncConnection,
    caller: Caller,
    args: QueryMemoryInput,
    scopes: list[Scope],
    items: list[MemoryItem],
    total: int,
    as_of: datetime | None,
) -> str:
    """Every read is logged in the same request: record_recall_save and provenance depend on it.

    The logged query has each secret replaced by `[redacted <kind>]`; the search used the original.
    """
    with db_span("insert_read", org=caller.org):
        row = await (
            await conn.execute(
                q.INSERT_READ,
                {"agent_id": caller.agent_id, "tool": caller.tool,
                 "query": redact_secrets(args.query) if args.query else args.query,
                 "scopes": [s.stored_name for s in scopes], "as_of": as_of, "tokens": total,
                 "item_ids": [i.id for i in items], "kinds": [i.kind for i in items],
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
