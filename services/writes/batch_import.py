"""import_episodes: many raw turns or documents in one transaction, embedded in batches.

This is the path bulk imports use (LoCoMo in the harness, agent-history import later). The
episodes are evidence, not facts: no entities, no supersession. Lexical statistics are updated
by the database triggers of migration 0003 inside this same transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from libs.contracts.bus import Caller
from libs.contracts.errors import InvalidArgument
from libs.contracts.imports import EpisodeIn, ImportEpisodesInput, ImportEpisodesResult
from libs.embed import MiniLM, count_tokens
from libs.secrets import find_secret
from libs.store import embedding_models
from libs.store.access import resolve_scope
from libs.telemetry import db_span
from services.writes.queries import SCOPE_WRITE_LOCK

EMBED_BATCH = 64

INSERT_IMPORTED_EPISODE = """
INSERT INTO episodes (id, scope_id, kind, agent_id, tool, project, session_id, speaker, content,
                      occurred_at, metadata, embedding, token_count, seq)
VALUES (%(id)s, %(scope_id)s, %(kind)s, %(agent_id)s, %(tool)s, %(project)s, %(session_id)s, %(speaker)s,
        %(content)s, %(occurred_at)s, %(metadata)s, %(embedding)s, %(tokens)s, %(seq)s)
"""


def _stored_text(episode: EpisodeIn) -> Iterator[tuple[str, str]]:
    """(field, text) for every string an imported episode stores, metadata keys and values included."""
    yield "content", episode.content
    for name in ("speaker", "session_id", "project"):
        value = getattr(episode, name)
        if value:
            yield name, value
    pending: list[Any] = [episode.metadata]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            yield "metadata", item
        elif isinstance(item, dict):
            pending += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            pending += item


async def import_episodes(
    conn: psycopg.AsyncConnection, caller: Caller, args: ImportEpisodesInput, embedder: MiniLM
) -> ImportEpisodesResult:
    """Store every episode or none; returns their ids in input order.

    Raises InvalidArgument when any episode holds a secret in any field it stores (content, speaker,
    session_id, project, metadata keys or values; nothing is stored), ScopeDenied or
    NotFound for a scope the token may not write.
    """
    for index, episode in enumerate(args.episodes, start=1):
        for where, text in _stored_text(episode):
            kind = find_secret(text)
            if kind:
                raise InvalidArgument(f"episode {index} ({where}) contains {kind}; secrets are never stored")
    scope = await resolve_scope(conn, caller, args.scope, "write")
    await conn.execute(SCOPE_WRITE_LOCK, (scope.id,))
    vectors = embedder.embed([e.content for e in args.episodes], batch_size=EMBED_BATCH)
    ids = [str(uuid.uuid4()) for _ in args.episodes]
    rows = [
        {"id": ident, "scope_id": scope.id, "kind": e.kind, "agent_id": caller.agent_id, "tool": caller.tool,
         "project": e.project, "session_id": e.session_id, "speaker": e.speaker, "content": e.content,
         "occurred_at": datetime.fromtimestamp(e.occurred_at, tz=UTC) if e.occurred_at is not None else None,
         "metadata": Jsonb(e.metadata), "embedding": vector, "tokens": count_tokens(e.content), "seq": e.seq}
        for ident, e, vector in zip(ids, args.episodes, vectors, strict=True)
    ]
    with db_span("insert_imported_episodes", org=caller.org):
        async with conn.cursor() as cur:
            await cur.executemany(INSERT_IMPORTED_EPISODE, rows)
        await conn.execute(embedding_models.RECORD, {"scope_id": scope.id, "model": embedder.name})
    return ImportEpisodesResult(imported=len(ids), episode_ids=ids, scope=scope.name)
