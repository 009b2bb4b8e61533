"""query_memory: scope and validity first, then ranking; every result scored by cosine to the query."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from libs.contracts.bus import Caller
from libs.contracts.common import Provenance
from libs.contracts.errors import InvalidArgument
from libs.contracts.query import MemoryItem, QueryMemoryInput, QueryMemoryResult
from libs.embed import MiniLM
from libs.store.scopes import Scope, resolve_read_scopes
from libs.telemetry import db_span
from services.retrieval import queries as q


async def query_memory(
    conn: psycopg.AsyncConnection, caller: Caller, args: QueryMemoryInput, embedder: MiniLM
) -> QueryMemoryResult:
    """Ranked facts (and evidence) for the query; an empty result carries a `note` saying why."""
    query = (args.query or "").strip()
    if not query and not args.digest and not args.about:
        raise InvalidArgument("query is required unless digest is true or about names an entity")
    scopes = await resolve_read_scopes(conn, caller, args.scope)
    scope_ids = [s.id for s in scopes if s.id is not None]
    at = datetime.fromtimestamp(args.as_of, tz=UTC) if args.as_of is not None else datetime.now(tz=UTC)
    embedding = embedder.embed_one(query) if query else None
    base = {"scope_ids": scope_ids, "at": at, "limit": args.top_k, "embedding": embedding}

    note: str | None = None
    rows: list[tuple[dict[str, Any], str, str]] = []  # (row, kind, channel)
    async with conn.cursor(row_factory=dict_row) as cur:
        if args.about:
            found, note = await _about_rows(cur, base, args.about)
            rows += [(r, "fact", "about") for r in found]
        elif args.digest and embedding is None:
            with db_span("digest_facts", org=caller.org):
                await cur.execute(q.DIGEST_FACTS, base)
                rows += [(r, "fact", "digest") for r in await cur.fetchall()]
        else:
            with db_span("dense_facts", org=caller.org):
                await cur.execute(q.DENSE_FACTS, base)
                rows += [(r, "fact", "dense") for r in await cur.fetchall()]
            if args.include_episodes:
                with db_span("dense_episodes", org=caller.org):
                    await cur.execute(q.DENSE_EPISODES, base)
                    rows += [(r, "episode", "dense") for r in await cur.fetchall()]

    rows.sort(key=lambda item: -(item[0]["score"] if item[0]["score"] is not None else -2.0))
    items, total, cut = _take(rows[: args.top_k], args.max_tokens)
    if not items and note is None:
        note = _empty_note(scopes, args)
    if cut:
        note = f"stopped at {total} tokens (max_tokens={args.max_tokens}); {cut} more results were left out"
    read_id = await _log_read(conn, caller, args, scopes, items, total, at if args.as_of is not None else None)
    return QueryMemoryResult(
        results=items, read_id=read_id, total_tokens=total, scopes=[s.name for s in scopes], note=note
    )


async def _about_rows(
    cur: psycopg.AsyncCursor[dict[str, Any]], base: dict[str, Any], names: list[str]
) -> tuple[list[dict[str, Any]], str | None]:
    ids: list[list[Any]] = []
    for name in names:
        await cur.execute(q.ABOUT_ENTITIES, {**base, "name": name})
        found = [r["id"] for r in await cur.fetchall()]
        if not found:
            return [], f"no entity is named '{name}' (exact name or alias, case-insensitive)"
        ids.append(found)
    first, second = ids[0], ids[1] if len(ids) > 1 else []
    await cur.execute(q.ABOUT_FACTS, {**base, "first": first, "second": second})
    rows = list(await cur.fetchall())
    if not rows and second:
        return [], f"'{names[0]}' and '{names[1]}' are not connected by any fact"
    return rows, None


def _take(
    rows: list[tuple[dict[str, Any], str, str]], max_tokens: int | None
) -> tuple[list[MemoryItem], int, int]:
    items: list[MemoryItem] = []
    total = 0
    for index, (row, kind, channel) in enumerate(rows):
        tokens = int(row["token_count"] or 0)
        if max_tokens is not None and total + tokens > max_tokens:
            return items, total, len(rows) - index
        total += tokens
        items.append(
            MemoryItem(
                kind=kind,  # type: ignore[arg-type]
                id=str(row["id"]),
                text=row["text"],
                score=round(float(row["score"]), 6) if row["score"] is not None else 0.0,
                rank=len(items) + 1,
                matched=[channel],
                tokens=tokens,
                provenance=Provenance(
                    agent_id=row["agent_id"], tool=row["tool"], project=row["project"],
                    session_id=row["session_id"], written_at=row["written_at"], valid_from=row["t_valid"],
                    valid_until=row["t_invalid"], scope=_public_scope(row["scope_name"]),
                ),
                source=row["source"], target=row["target"], relation=row["relation"],
            )
        )
    return items, total, 0


def _public_scope(stored: str) -> str:
    return "solo" if stored.startswith("solo:") else stored


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
    """Every read is logged in the same request: record_recall_save and provenance depend on it."""
    with db_span("insert_read", org=caller.org):
        row = await (
            await conn.execute(
                q.INSERT_READ,
                {"agent_id": caller.agent_id, "tool": caller.tool, "query": args.query,
                 "scopes": [s.stored_name for s in scopes], "as_of": as_of, "tokens": total},
            )
        ).fetchone()
        read_id = str(row[0])  # type: ignore[index]
        async with conn.cursor() as cur:
            await cur.executemany(
                q.INSERT_READ_RESULT, [(read_id, i.id, i.kind, i.rank, i.score) for i in items]
            )
    return read_id


__all__ = ["query_memory"]
