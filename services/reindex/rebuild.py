"""Rebuilding derived data of one scope: lexical statistics, and embeddings page by page.

Statistics are rebuilt in one transaction under the scope's write lock, so a concurrent write
either lands before (and is counted) or waits. Embeddings are rebuilt in pages so the CLI can
show progress and a long rebuild never holds one huge transaction.
"""

from __future__ import annotations

import psycopg

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.core.contracts.reindex import (
    LEXICAL_FORMAT_VERSION,
    CorpusStatus,
    LexicalStatusInput,
    LexicalStatusResult,
    ReindexInput,
    ReindexResult,
)
from echo_memory.libs.server.embed import MiniLM, embed_across_cores
from echo_memory.libs.server.store import embedding_models
from echo_memory.libs.server.store.access import resolve_scope
from echo_memory.libs.server.store.lexical import rebuild_scope_statistics
from echo_memory.services.reindex import queries as q
from echo_memory.services.reindex.graph_mirror import rebuild_scope

_ZERO_UUID = "00000000-0000-0000-0000-000000000000"


async def reindex(
    conn: psycopg.AsyncConnection, caller: Caller, args: ReindexInput, embedder: MiniLM
) -> ReindexResult:
    """One step of a rebuild; `next` is null when the step is complete.

    The graph step rebuilds the scope's part of the AGE mirror in one go (`skipped` says why when
    the database has no AGE, and nothing changes).

    The embeddings step also keeps the scope's model record (libs/server/store/embedding_models.py):
    its first page (no `after`) marks it in progress, its last page records this model.
    """
    scope = await resolve_scope(conn, caller, args.scope, "write")
    params = {"scope_id": scope.id}
    await conn.execute(q.SCOPE_WRITE_LOCK, (scope.id,))
    if args.step == "lexical":
        assert scope.id is not None  # resolving for "write" creates the row
        await rebuild_scope_statistics(conn, scope.id)
        rows = await (await conn.execute(q.STATS_OF_SCOPE, params)).fetchall()
        total = sum(int(r[1]) for r in rows)
        return ReindexResult(scope=scope.name, step="lexical", processed=total, total=total,
                             format_version=LEXICAL_FORMAT_VERSION)
    if args.step == "graph":
        total = int((await (await conn.execute(q.COUNT_FACTS, params)).fetchone())[0])  # type: ignore[index]
        mirrored = await rebuild_scope(conn, scope.id)
        if mirrored is None:
            return ReindexResult(scope=scope.name, step="graph", processed=0, total=total,
                                 skipped="the database has no Apache AGE (extension age): no graph mirror to rebuild")
        return ReindexResult(scope=scope.name, step="graph", processed=mirrored, total=total)
    after_t, after_id = 0, _ZERO_UUID
    if args.after:
        try:
            t, ident = args.after.split(":", 1)
            after_t, after_id = int(t), ident
        except ValueError:
            raise InvalidArgument(f"after: '{args.after}' is not a cursor returned by reindex") from None
    model = {**params, "model": embedder.name, "pending": embedding_models.pending(embedder.name)}
    if not args.after:
        await conn.execute(embedding_models.REPLACE, {**params, "model": model["pending"]})
    total = int((await (await conn.execute(q.COUNT_EMBEDDED, params)).fetchone())[0])  # type: ignore[index]
    page = await (
        await conn.execute(q.PAGE_EMBEDDED, {**params, "after_t": after_t, "after_id": after_id, "limit": args.limit})
    ).fetchall()
    if page:
        vectors = await embed_across_cores(embedder, [str(r[2]) for r in page])  # off the event loop
        async with conn.cursor() as cur:
            for (table, ident, _), vector in zip(page, vectors, strict=True):
                await cur.execute(q.UPDATE_EMBEDDING[table], {**params, "id": ident, "embedding": vector})
    cursor = f"{page[-1][0]}:{page[-1][1]}" if len(page) == args.limit else None
    if cursor is None:
        await conn.execute(embedding_models.FINISH, model)
    return ReindexResult(scope=scope.name, step="embeddings", processed=len(page), total=total, next=cursor)


async def lexical_status(
    conn: psycopg.AsyncConnection, caller: Caller, args: LexicalStatusInput, model: str
) -> LexicalStatusResult:
    """Per corpus: documents, what the statistics say, and whether queries use BM25 or ts_rank;
    and which embedding model made the scope's vectors, against the one `model` this service runs."""
    scope = await resolve_scope(conn, caller, args.scope, "read")
    params = {"scope_id": scope.id}
    counts = {r[0]: int(r[1]) for r in await (await conn.execute(q.CORPUS_COUNTS, params)).fetchall()}
    stats = {r[0]: (int(r[1]), r[2]) for r in await (await conn.execute(q.STATS_OF_SCOPE, params)).fetchall()}
    corpora = []
    for corpus in ("facts", "episodes"):
        docs, version = stats.get(corpus, (None, None))
        mode, reason = "bm25", None
        if docs is None and counts[corpus]:
            mode, reason = "ts_rank", "no statistics: run `echo-memory reindex`"
        elif docs is not None and version != LEXICAL_FORMAT_VERSION:
            mode, reason = "ts_rank", (
                f"statistics are format {version}, this code needs {LEXICAL_FORMAT_VERSION}: run `echo-memory reindex`"
            )
        elif docs is not None and docs != counts[corpus]:
            reason = f"statistics count {docs} documents but the scope holds {counts[corpus]}: run `echo-memory reindex`"
        corpora.append(CorpusStatus(corpus=corpus, documents=counts[corpus], stats_documents=docs,
                                    format_version=version, mode=mode, reason=reason))  # type: ignore[arg-type]
    row = await (await conn.execute(embedding_models.MODEL_OF_SCOPE, params)).fetchone()
    recorded = str(row[0]) if row else None
    stale = [(scope.name, recorded)] if recorded is not None and recorded != model else []
    reason = embedding_models.mismatch_note(stale, model)  # the words query_memory's note uses
    return LexicalStatusResult(scope=scope.name, code_format_version=LEXICAL_FORMAT_VERSION, corpora=corpora,
                               embedding_model=recorded, code_embedding_model=model, embedding_reason=reason)
