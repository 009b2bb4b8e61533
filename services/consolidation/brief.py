"""The session brief: what memory knows about a project, from its digests, within a budget."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.consolidation import BriefInput, BriefItem, BriefResult
from echo_memory.libs.core.contracts.framing import MEMORY_NOTICE, frame_text
from echo_memory.libs.server.store import access
from echo_memory.services.consolidation import queries as q

# The digests read, in the brief's order, to fill the budget: a few dozen fit in the largest one, and
# the rest fill the gaps that larger ones leave (a brief of 600 tokens after a 589-token entity digest
# that did not fit); a large store's other digests are counted, not read. From the brief's covering
# index, 200 rows cost ~0.5 ms of Postgres at 100k facts.
CANDIDATE_ROWS = 200
EMPTY = "no digests yet: run `echo-memory consolidate` (or wait for the next automatic run)"


def _fit(order: list[dict[str, Any]], max_tokens: int) -> list[str]:
    """The ids of the digests the brief quotes: in order, each that still fits in `max_tokens` (a
    smaller digest further down may fit after a larger one did not)."""
    chosen: list[str] = []
    used = 0
    for row in order:
        if used + row["token_count"] <= max_tokens:
            used += row["token_count"]
            chosen.append(row["digest_id"])
    return chosen


def _quoted(item: BriefItem) -> str:
    """A digest as the brief's text shows it: its summary, then its abstract marked as the model's."""
    if item.abstract is None:
        return item.summary
    return (f"{item.summary}\nAbstract written by your own model {item.abstract_model} (each sentence checked "
            f"against the facts it cites): {item.abstract}")


def _project_names(project: str | None) -> list[str]:
    """The project as given and, for a path, its last part."""
    if not project:
        return []
    last = project.rstrip("/").rsplit("/", 1)[-1]
    return sorted({project, last} - {""})


async def brief(conn: psycopg.AsyncConnection, caller: Caller, args: BriefInput) -> BriefResult:
    """The current top digests of the scopes the caller may read (or names): those whose facts were
    written in `project` first; areas, then entity digests, then topics no area holds; the most
    recently active first within each; as many as fit in `max_tokens`.

    Raises what scope resolution raises for a scope the caller may not read or that does not exist.
    """
    scopes = await access.named_or_readable_scopes(conn, caller, args.scope)
    scope_ids = [s.id for s in scopes if s.id is not None]
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.BRIEF_ORDER, {"scope_ids": scope_ids, "projects": _project_names(args.project),
                                          "rows": CANDIDATE_ROWS})
        order = await cur.fetchall()
        chosen = _fit(order, args.max_tokens)
        rows: list[dict[str, Any]] = []
        if chosen:
            await cur.execute(q.BRIEF_ITEMS, {"ids": chosen})
            rows = await cur.fetchall()
    available = int(order[0]["available"]) if order else 0
    names: dict[str, str] = {s.stored_name: s.name for s in scopes}
    items = [BriefItem(digest_id=r["digest_id"], kind=r["kind"], entity=r["entity"],
                       scope=names.get(r["scope_name"]) or r["scope_name"], summary=r["summary"], abstract=r["abstract"],
                       abstract_model=r["abstract_model"], facts=r["facts"], tokens=r["token_count"],
                       last_seen=r["last_seen"]) for r in rows]
    used = sum(item.tokens for item in items)
    note = None
    if not order:
        note = EMPTY
    elif not items:
        note = f"no digest fits in {args.max_tokens} tokens; the smallest takes {min(r['token_count'] for r in order)}"
    heading = f"Memory brief: {len(items)} of {available} digests" + (
        f", project {args.project} first" if args.project else "")
    text = frame_text("\n\n".join([heading, *(_quoted(item) for item in items)]))
    return BriefResult(memory_notice=MEMORY_NOTICE, items=items, text=text, tokens=used,
                       digests_available=available, note=note)
