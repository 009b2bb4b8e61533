"""import_episodes: many raw turns or documents in one transaction, embedded in batches.

This is the path bulk imports use (LoCoMo in the harness, `echo-memory import` of agent
histories). The episodes are evidence, not facts: no entities, no supersession. Lexical
statistics are updated by the database triggers of migration 0003 inside this same transaction.

An episode with `source` + `external_id` is stored at most once in the store (migration 0007's
unique index on the pair, kept in metadata): pairs the store already holds are not embedded or
inserted again and count as `already`; a pair another import inserts at the same moment loses
the race quietly (ON CONFLICT DO NOTHING) and is reported the same way.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.core.contracts.imports import (
    RESERVED_METADATA_KEY,
    EpisodeIn,
    ImportEpisodesInput,
    ImportEpisodesResult,
)
from echo_memory.libs.core.secrets import find_secret
from echo_memory.libs.server.embed import MiniLM, count_tokens, embed_across_cores
from echo_memory.libs.server.store import embedding_models
from echo_memory.libs.server.store.access import resolve_scope
from echo_memory.libs.server.telemetry import db_span
from echo_memory.services.writes.forget import turn_hash
from echo_memory.services.writes.queries import SCOPE_WRITE_LOCK

EMBED_BATCH = 64

INSERT_IMPORTED_EPISODE = """
INSERT INTO episodes (id, scope_id, kind, agent_id, tool, project, session_id, speaker, content,
                      occurred_at, metadata, embedding, token_count, seq)
VALUES (%(id)s, %(scope_id)s, %(kind)s, %(agent_id)s, %(tool)s, %(project)s, %(session_id)s, %(speaker)s,
        %(content)s, %(occurred_at)s, %(metadata)s, %(embedding)s, %(tokens)s, %(seq)s)
ON CONFLICT ((metadata->>'source'), (metadata->>'external_id')) WHERE metadata ? 'external_id' DO NOTHING
"""
# The stored episode of each (source, external_id) pair, in any scope.
STORED_EXTERNAL = """
SELECT e.id, e.metadata->>'source', e.metadata->>'external_id'
FROM episodes e
JOIN unnest(%(sources)s::text[], %(externals)s::text[]) AS p(source, external_id)
  ON e.metadata->>'source' = p.source AND e.metadata->>'external_id' = p.external_id
WHERE e.metadata ? 'external_id'
"""

# Which of these turn origins (forget.turn_hash digests) an erasure took away.
ERASED_TURNS = """
SELECT h FROM erasures e, jsonb_array_elements_text(e.erased_ids->'turn_hashes') AS h WHERE h = ANY(%s::text[])
"""


def _stored_text(episode: EpisodeIn) -> Iterator[tuple[str, str]]:
    """(field, text) for every string an imported episode stores, metadata keys and values included."""
    yield "content", episode.content
    for name in ("speaker", "session_id", "project", "external_id"):
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


def _check_origin(index: int, episode: EpisodeIn) -> None:
    if (episode.source is None) != (episode.external_id is None):
        raise InvalidArgument(f"episode {index}: source and external_id go together; give both or neither")
    if RESERVED_METADATA_KEY in episode.metadata:
        raise InvalidArgument(f"episode {index}: metadata key '{RESERVED_METADATA_KEY}' is set by the store from "
                              "the external_id field; pass it there (with source)")
    if episode.source is not None and episode.metadata.get("source", episode.source) != episode.source:
        raise InvalidArgument(f"episode {index}: metadata.source differs from the source field; give one source")


async def _stored_pairs(
    conn: psycopg.AsyncConnection, pairs: list[tuple[str, str]]
) -> dict[tuple[str, str], str]:
    if not pairs:
        return {}
    rows = await (await conn.execute(
        STORED_EXTERNAL, {"sources": [p[0] for p in pairs], "externals": [p[1] for p in pairs]})).fetchall()
    return {(r[1], r[2]): str(r[0]) for r in rows}


async def _erased_pairs(conn: psycopg.AsyncConnection, pairs: list[tuple[str, str]]) -> set[tuple[str, str]]:
    if not pairs:
        return set()
    digests = {turn_hash(*pair): pair for pair in pairs}
    rows = await (await conn.execute(ERASED_TURNS, (list(digests),))).fetchall()
    return {digests[r[0]] for r in rows}


async def import_episodes(
    conn: psycopg.AsyncConnection, caller: Caller, args: ImportEpisodesInput, embedder: MiniLM
) -> ImportEpisodesResult:
    """Store every new episode or none; returns one id per input episode, in input order.

    An episode whose (source, external_id) the store already holds (or that repeats an earlier
    one of the same call) is not stored again: its id is the stored episode's and it counts in
    `already`; one an erasure took away (`echo-memory forget`) is not stored either, its id is empty
    and it counts in `erased`. Raises InvalidArgument when any episode holds a secret in any field it stores
    (content, speaker, session_id, project, external_id, metadata keys or values; nothing is
    stored), or pairs source and external_id wrongly; ScopeDenied or NotFound for a scope the
    token may not write.
    """
    for index, episode in enumerate(args.episodes, start=1):
        _check_origin(index, episode)
        for where, text in _stored_text(episode):
            kind = find_secret(text)
            if kind:
                raise InvalidArgument(f"episode {index} ({where}) contains {kind}; secrets are never stored")
    scope = await resolve_scope(conn, caller, args.scope, "write")
    pairs = list(dict.fromkeys((e.source, e.external_id) for e in args.episodes
                               if e.source is not None and e.external_id is not None))
    stored = await _stored_pairs(conn, pairs)
    erased = await _erased_pairs(conn, [p for p in pairs if p not in stored])
    ids: list[str] = []
    fresh: list[tuple[str, EpisodeIn]] = []
    claimed: dict[tuple[str, str], str] = {}
    for e in args.episodes:
        pair = (e.source, e.external_id) if e.source is not None and e.external_id is not None else None
        if pair is not None and pair in stored:
            ids.append(stored[pair])
        elif pair is not None and pair in erased:
            ids.append("")  # erased content never comes back through a re-import
        elif pair is not None and pair in claimed:
            ids.append(claimed[pair])  # the same turn twice in one call
        else:
            ident = str(uuid.uuid4())
            if pair is not None:
                claimed[pair] = ident
            ids.append(ident)
            fresh.append((ident, e))
    # Embedding takes seconds for a full batch: done off the event loop, across the cores, and before
    # the scope's write lock, so other writers of the scope do not queue behind it.
    vectors = await embed_across_cores(embedder, [e.content for _, e in fresh], batch_size=EMBED_BATCH)
    await conn.execute(SCOPE_WRITE_LOCK, (scope.id,))
    if fresh:
        rows = [
            {"id": ident, "scope_id": scope.id, "kind": e.kind, "agent_id": caller.agent_id, "tool": caller.tool,
             "project": e.project, "session_id": e.session_id, "speaker": e.speaker, "content": e.content,
             "occurred_at": datetime.fromtimestamp(e.occurred_at, tz=UTC) if e.occurred_at is not None else None,
             "metadata": Jsonb(_metadata(e)), "embedding": vector, "tokens": count_tokens(e.content),
             "seq": e.seq}
            for (ident, e), vector in zip(fresh, vectors, strict=True)
        ]
        with db_span("insert_imported_episodes", org=caller.org):
            async with conn.cursor() as cur:
                await cur.executemany(INSERT_IMPORTED_EPISODE, rows)
            await conn.execute(embedding_models.RECORD, {"scope_id": scope.id, "model": embedder.name})
    # A pair another transaction committed between our look-up and our insert was skipped by
    # ON CONFLICT: read back the ids that are really stored.
    winners = await _stored_pairs(conn, list(claimed))
    raced = {ident for pair, ident in claimed.items() if winners.get(pair, ident) != ident}
    final = [winners.get((e.source, e.external_id), i) if e.source and e.external_id else i
             for i, e in zip(ids, args.episodes, strict=True)]
    imported = len(fresh) - len(raced)
    refused = sum(1 for i in final if not i)
    return ImportEpisodesResult(imported=imported, episode_ids=final, scope=scope.name,
                                already=len(args.episodes) - imported - refused, erased=refused)


def _metadata(episode: EpisodeIn) -> dict[str, Any]:
    if episode.source is None or episode.external_id is None:
        return episode.metadata
    return {**episode.metadata, "source": episode.source, "external_id": episode.external_id}
