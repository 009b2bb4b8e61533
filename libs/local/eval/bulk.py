"""The benchmark's bulk path: COPY synthetic facts straight into a throw-away org database.

Used only by `echo-memory benchmark` for the large store sizes, only against the database of
the throw-away system it started itself, and the output says when it was used. It writes what
the write path writes for retrieval to see — entities (with name embeddings), one `write`
episode per batch of 50, and facts with their embeddings from the real model — and relies on
the same AFTER INSERT triggers (migration 0003) to keep the BM25 statistics exact. It does not
write audit or outbox rows (nothing reads them at query time). Afterwards it runs VACUUM ANALYZE,
as autovacuum would shortly after a bulk load.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import numpy as np
import psycopg

from echo_memory.libs.local.eval.synthetic import Fact, FactSource
from echo_memory.libs.server.embed import MiniLM, count_tokens
from echo_memory.libs.server.store import embedding_models

EMBED_CHUNK = 2048

SCOPE_ID = "SELECT id FROM scopes WHERE name = %s"
SCOPE_ENTITIES = "SELECT id, name FROM entities WHERE scope_id = %s"
COPY_ENTITIES = "COPY entities (id, scope_id, name, type, embedding, created_by) FROM STDIN"
COPY_EPISODES = (
    "COPY episodes (id, scope_id, kind, agent_id, tool, project, session_id, content, token_count) FROM STDIN"
)
COPY_FACTS = (
    "COPY facts (scope_id, episode_id, source_entity, target_entity, relation, text, confidence, agent_id, "
    "tool, project, session_id, embedding, token_count) FROM STDIN"
)
VACUUM = ("VACUUM ANALYZE facts", "VACUUM ANALYZE entities", "VACUUM ANALYZE episodes")
AGENT = "benchmark-bulk"


def vector_text(values: np.ndarray) -> str:
    """A vector as pgvector's text form for COPY (six decimals)."""
    return "[" + ",".join(f"{v:.6f}" for v in values.tolist()) + "]"


async def _embed(embedder: MiniLM, texts: list[str], progress: Callable[[int], None] | None) -> np.ndarray:
    """Vectors in chunks, off the event loop (NATS connections keep answering pings meanwhile)."""
    parts = []
    for start in range(0, len(texts), EMBED_CHUNK):
        parts.append(await asyncio.to_thread(embedder.embed, texts[start : start + EMBED_CHUNK]))
        if progress:
            progress(min(start + EMBED_CHUNK, len(texts)))
    return np.vstack(parts) if parts else np.zeros((0, MiniLM.dim), dtype=np.float32)


async def copy_facts(
    database_url: str, scope: str, source: FactSource, count: int, embedder: MiniLM,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Append `count` generated facts to `scope` in one transaction; returns how many were stored."""
    batches = list(source.batches(count))
    facts: list[Fact] = [f for b in batches for f in b]
    vectors = await _embed(embedder, [f.text for f in facts], progress)
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        row = await (await conn.execute(SCOPE_ID, (scope,))).fetchone()
        if row is None:
            raise RuntimeError(f"scope {scope!r} does not exist in the benchmark database")
        scope_id = row[0]
        ids = {name: ident for ident, name in await (await conn.execute(SCOPE_ENTITIES, (scope_id,))).fetchall()}
        fresh = sorted({n for f in facts for n in (f.source, f.target)} - set(ids))
        name_vectors = await _embed(embedder, fresh, None)
        async with conn.cursor() as cur:
            async with cur.copy(COPY_ENTITIES) as copy:
                for name, vector in zip(fresh, name_vectors, strict=True):
                    ids[name] = uuid.uuid4()
                    await copy.write_row((ids[name], scope_id, name, name.rsplit(" ", 1)[-1], vector_text(vector), AGENT))
            episode_of: list[uuid.UUID] = []
            async with cur.copy(COPY_EPISODES) as copy:
                for batch in batches:
                    episode = uuid.uuid4()
                    content = "\n".join(f.text for f in batch)
                    await copy.write_row((episode, scope_id, "write", AGENT, "benchmark", "benchmark", "benchmark",
                                          content, count_tokens(content)))
                    episode_of.extend([episode] * len(batch))
            async with cur.copy(COPY_FACTS) as copy:
                for fact, vector, episode in zip(facts, vectors, episode_of, strict=True):
                    await copy.write_row((scope_id, episode, ids[fact.source], ids[fact.target], fact.relation,
                                          fact.text, "extracted", AGENT, "benchmark", "benchmark", "benchmark",
                                          vector_text(vector), count_tokens(fact.text)))
        await conn.execute(embedding_models.RECORD, {"scope_id": scope_id, "model": embedder.name})
        await conn.commit()
        source.known.update(fresh)
        await conn.set_autocommit(True)
        for statement in VACUUM:
            await conn.execute(statement)
    return len(facts)
