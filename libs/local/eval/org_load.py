"""Load an organisation's history (org_history.py) by COPY, as `write_episode` would have stored it.

For the consolidation benchmark's large stores: the model embeds in chunks on both cores, and
the rows of one chunk stream in by COPY while the next embeds. The rows are those the
write path writes when each session is one `write_episode` at the session's time, with every name
declared new on first use: the entities (name vectors, their first writer), one `write` episode per
session, the facts with their provenance, vectors, token counts and instruction flags, and for a
restated edge the new version that ends the old one (`supersedes`, `t_invalid`). The lexical
statistics follow from the same AFTER INSERT triggers. Not written: audit and outbox rows (nothing
reads them at query or consolidation time); tests/bench/test_org_load.py holds the rows against the
write path's. Reads go into the read log as agents' recalls would have.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta

import numpy as np
import psycopg
from pgvector.psycopg import register_vector_async

from echo_memory.libs.core.hygiene.instructions import instruction_flags
from echo_memory.libs.local.eval.bulk import vector_text
from echo_memory.libs.local.eval.org_history import OrgHistory, OrgRead, entity_type
from echo_memory.libs.local.eval.vector_cache import VectorCache
from echo_memory.libs.server.embed import MiniLM, count_tokens, embed_across_cores, settle
from echo_memory.libs.server.store import embedding_models

EMBED_CHUNK = 4096
READ_QUERY = "recalled during work (org history)"

COPY_ENTITIES = "COPY entities (id, scope_id, name, type, embedding, created_by) FROM STDIN"
COPY_EPISODES = (
    "COPY episodes (id, scope_id, kind, agent_id, tool, project, session_id, content, token_count, written_at, flags)"
    " FROM STDIN"
)
COPY_FACTS = (
    "COPY facts (id, scope_id, episode_id, source_entity, target_entity, relation, text, confidence, t_valid, "
    "t_invalid, supersedes, agent_id, tool, project, session_id, written_at, embedding, token_count, flags) FROM STDIN"
    " (FORMAT BINARY)"
)
# Binary rows: a vector goes as its 384 floats, not as 384 numbers formatted as text (~0.3 ms a row).
FACT_TYPES = ("uuid", "uuid", "uuid", "uuid", "uuid", "text", "text", "text", "timestamptz", "timestamptz", "uuid",
              "text", "text", "text", "text", "timestamptz", "vector", "integer", "text[]")
COPY_READS = "COPY reads (id, agent_id, query, scopes, tokens, created_at) FROM STDIN"
COPY_READ_RESULTS = "COPY read_results (read_id, item_id, item_kind, rank, score) FROM STDIN"
NOW = "SELECT now()"
FACTS_VECTOR_INDEX = "facts_embedding_hnsw"
INDEX_DEFINITION = "SELECT pg_get_indexdef(to_regclass(%(name)s))"
DROP_FACTS_VECTOR_INDEX = "DROP INDEX facts_embedding_hnsw"
# As migration 0003 defines it; vectors_indexed_after checks the rebuilt definition against the dropped one.
BUILD_FACTS_VECTOR_INDEX = (
    "CREATE INDEX facts_embedding_hnsw ON facts USING hnsw (embedding vector_cosine_ops)"
    " WITH (m = 16, ef_construction = 64)"
)
# Room for the whole graph of a 1M-fact store while it builds (pgvector builds far faster in memory).
BUILD_MEMORY = "SET LOCAL maintenance_work_mem = '3GB'"


def _array(values: Sequence[str]) -> str:
    return "{" + ",".join(values) + "}"


async def load_history(
    conn: psycopg.AsyncConnection, scope_id: str, history: OrgHistory, embedder: MiniLM,
    progress: Callable[[int], None] | None = None, cache: VectorCache | None = None,
) -> list[uuid.UUID]:
    """COPY `history` into the scope (in the caller's transaction); returns the facts' ids in order.

    The scope must hold none of the history's names yet (a history is one organisation's store).
    With `cache`, the facts' vectors come from a file an earlier load of the same texts wrote, or
    are computed and written to one (entity names are always embedded: they are few).
    """
    await register_vector_async(conn)  # the facts' binary COPY sends vectors as pgvector's binary form
    now: datetime = (await (await conn.execute(NOW)).fetchone())[0]  # type: ignore[index]
    facts = history.facts
    at = [now - timedelta(days=f.age_days) for f in facts]
    ids = [uuid.uuid4() for _ in facts]
    entity_ids = await _copy_entities(conn, scope_id, history, embedder)
    episode_of = await _copy_episodes(conn, scope_id, history, at)
    ended = history.successors()
    texts = [f.text for f in facts]
    known = cache.load(texts) if cache is not None else None
    scope = uuid.UUID(str(scope_id))  # binary COPY takes a uuid as one
    names_flagged = functools.cache(instruction_flags)  # relations and names recur on thousands of facts
    sink = cache.writer(texts) if cache is not None and known is None else None

    def row(i: int, vector: np.ndarray) -> tuple[object, ...]:
        fact, successor = facts[i], ended.get(i)
        return (ids[i], scope, episode_of[i], entity_ids[fact.source], entity_ids[fact.target], fact.relation,
                fact.text, "extracted", at[i], None if successor is None else at[successor],
                None if fact.replaces is None else ids[fact.replaces], fact.agent, fact.tool, fact.project,
                fact.session, at[i], vector, count_tokens(fact.text),
                instruction_flags(fact.text) or names_flagged(fact.relation, fact.source, fact.target))

    def embedding(start: int) -> asyncio.Task[np.ndarray] | None:
        if start >= len(facts):
            return None
        if known is not None:
            return asyncio.create_task(_given(known[start : start + EMBED_CHUNK]))
        return asyncio.create_task(embed_across_cores(embedder, texts[start : start + EMBED_CHUNK]))

    # The next chunk embeds while this one streams in, so the model and Postgres overlap.
    pending = embedding(0)
    try:
        async with conn.cursor() as cur, cur.copy(COPY_FACTS) as copy:
            copy.set_types(list(FACT_TYPES))
            for start in range(0, len(facts), EMBED_CHUNK):
                assert pending is not None
                vectors = await pending
                pending = embedding(start + EMBED_CHUNK)
                await asyncio.sleep(0)  # let it hand its parts to the worker threads before the rows go
                if sink is not None:
                    sink.put(start, vectors)
                for offset, vector in enumerate(vectors):
                    await copy.write_row(row(start + offset, vector))
                if progress:
                    progress(start + len(vectors))
    except BaseException:
        if sink is not None:
            sink.discard()
        raise
    finally:
        if pending is not None:  # a failed COPY leaves the next chunk's embedding running
            pending.cancel()
            await settle(pending)
    if sink is not None:
        sink.commit()
    await conn.execute(embedding_models.RECORD, {"scope_id": scope_id, "model": embedder.name})
    return ids


@asynccontextmanager
async def vectors_indexed_after(conn: psycopg.AsyncConnection) -> AsyncIterator[None]:
    """Within the caller's transaction: the facts' HNSW index dropped, then rebuilt once at the end.

    For a throw-away benchmark database only: the rebuild holds an exclusive lock on `facts` until
    the transaction ends. Inserting a row into an HNSW graph of a million costs Postgres
    milliseconds of CPU; building the graph once, with parallel workers, a fraction of that. The
    rebuilt index is the one the migrations define (checked; a mismatch raises).
    """
    before = await _index_definition(conn)
    await conn.execute(DROP_FACTS_VECTOR_INDEX)
    yield
    await conn.execute(BUILD_MEMORY)
    await conn.execute(BUILD_FACTS_VECTOR_INDEX)
    after = await _index_definition(conn)
    if after != before:
        raise RuntimeError(f"rebuilt {FACTS_VECTOR_INDEX} differs from the migrations' one: {after!r} != {before!r}")


async def _index_definition(conn: psycopg.AsyncConnection) -> str | None:
    row = await (await conn.execute(INDEX_DEFINITION, {"name": FACTS_VECTOR_INDEX})).fetchone()
    return None if row is None else row[0]


async def _given(vectors: np.ndarray) -> np.ndarray:
    return np.asarray(vectors)


async def _copy_entities(conn: psycopg.AsyncConnection, scope_id: str, history: OrgHistory,
                         embedder: MiniLM) -> dict[str, uuid.UUID]:
    first_writer: dict[str, str] = {}
    for fact in history.facts:
        for name in (fact.source, fact.target):
            first_writer.setdefault(name, fact.agent)
    names = list(first_writer)
    vectors = await embed_across_cores(embedder, names)
    ids = {name: uuid.uuid4() for name in names}
    async with conn.cursor() as cur, cur.copy(COPY_ENTITIES) as copy:
        for name, vector in zip(names, vectors, strict=True):
            await copy.write_row((ids[name], scope_id, name, entity_type(name), vector_text(vector), first_writer[name]))
    return ids


async def _copy_episodes(conn: psycopg.AsyncConnection, scope_id: str, history: OrgHistory,
                         at: list[datetime]) -> list[uuid.UUID]:
    """One `write` episode per session; returns each fact's episode id."""
    episode_of: list[uuid.UUID] = [uuid.UUID(int=0)] * len(history.facts)
    async with conn.cursor() as cur, cur.copy(COPY_EPISODES) as copy:
        for members in history.sessions():
            episode = uuid.uuid4()
            first = history.facts[members[0]]
            content = "\n".join(history.facts[i].text for i in members)
            await copy.write_row((episode, scope_id, "write", first.agent, first.tool, first.project, first.session,
                                  content, count_tokens(content), at[members[0]], _array(instruction_flags(content))))
            for i in members:
                episode_of[i] = episode
    return episode_of


async def load_reads(conn: psycopg.AsyncConnection, stored_scope: str, fact_ids: list[uuid.UUID],
                     reads: list[OrgRead]) -> int:
    """Put `reads` in the read log of the scope stored as `stored_scope`; returns the results written."""
    now: datetime = (await (await conn.execute(NOW)).fetchone())[0]  # type: ignore[index]
    read_ids = [uuid.uuid4() for _ in reads]
    async with conn.cursor() as cur:
        async with cur.copy(COPY_READS) as copy:
            for read_id, read in zip(read_ids, reads, strict=True):
                await copy.write_row((read_id, read.agent, READ_QUERY, _array([stored_scope]), 0,
                                      now - timedelta(days=read.age_days)))
        written = 0
        async with cur.copy(COPY_READ_RESULTS) as copy:
            for read_id, read in zip(read_ids, reads, strict=True):
                for rank, index in enumerate(read.facts, start=1):
                    await copy.write_row((read_id, fact_ids[index], "fact", rank, 0.5))
                    written += 1
    return written


__all__ = ["load_history", "load_reads", "vectors_indexed_after"]
