"""unhinted_facts, add_causal_hints and clear_post_hoc: what the opt-in model commands change, and undo.

A causal hint is added the way write_episode adds one to an unchanged claim: the current version
ends and a copy of it with the hint starts, audited `causal_hint_added` with post_hoc set. Here the
copy reuses the stored vector (the sentence is unchanged) and is refused unless the version named
is still current and unhinted, so a hint can never revive a claim someone changed meanwhile.

Clearing a command's writes never edits or deletes a fact. Each current version the command is
the author of ends; when an earlier version on that edge was someone else's, a copy of that
version starts, so the edge says again what it said before the command wrote. A hint version is
an annotation: its claim's author is the author of the version it annotates, so clearing the
distil command also ends the hints added on top of its facts. Imported turns the distil command
had marked distilled are pending again (their bookkeeping rows are released, the audit keeps
them). Every row is audited with post_hoc set. SQL: post_hoc.sql.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.core.contracts.identity import DISTIL_AGENT, HINTS_AGENT, POST_HOC_AGENTS, require_admin
from echo_memory.libs.core.contracts.post_hoc import (
    HINTS_TOOL,
    AddCausalHintsInput,
    AddCausalHintsResult,
    ClearedFact,
    ClearPostHocInput,
    ClearPostHocResult,
    HintAdded,
    HintSkipped,
    UnhintedFact,
    UnhintedFactsInput,
    UnhintedFactsResult,
)
from echo_memory.libs.server.store.access import Scope, accessible_scopes
from echo_memory.libs.server.store.sql_files import SqlFile
from echo_memory.services.writes import queries as q
from echo_memory.services.writes.cursors import make_cursor, read_cursor
from echo_memory.services.writes.episode import AuditEntry, audit, emit
from echo_memory.services.writes.evidence import ids

sql = SqlFile(Path(__file__).with_name("post_hoc.sql"))


async def unhinted_facts(conn: psycopg.AsyncConnection, caller: Caller, args: UnhintedFactsInput) -> UnhintedFactsResult:
    """Current facts with no causal hint in the shared and named scopes, oldest first; empty when none.

    Raises ScopeDenied for any caller but the admin identity, InvalidArgument for a foreign cursor.
    """
    require_admin(caller, "list facts for causal hints")
    k1, k2 = read_cursor(args.cursor, "unhinted_facts")
    scopes = {s.id: s.name for s in await accessible_scopes(conn, caller, "read") if s.id is not None}
    if not scopes:
        return UnhintedFactsResult(facts=[])
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql("unhinted"), {"scope_ids": list(scopes), "first": k1 is None, "k1": k1, "k2": k2,
                                            "limit": args.limit + 1})
        rows: list[dict[str, Any]] = await cur.fetchall()
    page = rows[: args.limit]
    facts = [UnhintedFact(fact_id=str(r["id"]), scope=scopes[str(r["scope_id"])], source=r["source"],
                          target=r["target"], relation=r["relation"], text=r["text"]) for r in page]
    cursor = make_cursor(page[-1]["written_at"], page[-1]["id"]) if len(rows) > args.limit else None
    return UnhintedFactsResult(facts=facts, next_cursor=cursor)


def _scope(scope_id: Any, name: str) -> Scope:
    return Scope(id=str(scope_id), name=name, stored_name=name)


async def _lock_scopes(conn: psycopg.AsyncConnection, scope_ids: list[str]) -> datetime:
    """Every scope's write lock in one order (no deadlock with another multi-scope writer), then the clock."""
    row = None
    for scope_id in sorted(scope_ids):
        row = await (await conn.execute(q.LOCK_SCOPE_THEN_NOW, (scope_id,))).fetchone()
    if row is None:
        row = await (await conn.execute(q.CLOCK)).fetchone()
    assert row is not None
    now: datetime = row[0]
    return now


async def add_causal_hints(
    conn: psycopg.AsyncConnection, caller: Caller, args: AddCausalHintsInput
) -> AddCausalHintsResult:
    """Each hint as a new version of its fact, audited post-hoc; a fact no longer current or hinted is skipped.

    Raises ScopeDenied for any caller but the admin identity; InvalidArgument (nothing written) for
    a malformed id, a fact named twice, or a quote that is not a verbatim part of the fact's sentence.
    """
    require_admin(caller, "add causal hints")
    fact_ids = [ids([h.fact_id], "fact id")[0] for h in args.hints]
    if len(set(fact_ids)) != len(fact_ids):
        raise InvalidArgument("a fact is named twice; send one hint per fact")
    readable = {s.id for s in await accessible_scopes(conn, caller, "read") if s.id is not None}
    scope_rows = await (await conn.execute(sql("scopes_of"), {"ids": fact_ids})).fetchall()
    now = await _lock_scopes(conn, [str(r[0]) for r in scope_rows if str(r[0]) in readable])
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql("lock_facts"), {"ids": fact_ids, "scope_ids": list(readable)})
        found = {str(r["id"]): r for r in await cur.fetchall()}
    for fact_id, hint in zip(fact_ids, args.hints, strict=True):
        row = found.get(fact_id)
        if row is not None and hint.quote not in row["text"]:
            raise InvalidArgument(f"the quote for fact {fact_id} is not a verbatim part of its sentence")
    writer = Caller(org=caller.org, agent_id=HINTS_AGENT, tool=HINTS_TOOL)
    result = AddCausalHintsResult()
    for fact_id, hint in zip(fact_ids, args.hints, strict=True):
        row = found.get(fact_id)
        if row is None:
            result.skipped.append(HintSkipped(fact_id=fact_id, reason="no such fact in the shared or named scopes"))
        elif not row["current"]:
            result.skipped.append(HintSkipped(fact_id=fact_id, reason="the fact is no longer current"))
        elif row["causal_hint"] is not None:
            result.skipped.append(HintSkipped(fact_id=fact_id, reason=f"it has a hint already ({row['causal_hint']})"))
        else:
            await conn.execute(sql("end_version"), {"now": now, "id": fact_id, "scope_id": row["scope_id"]})
            new = await (await conn.execute(sql("hinted_copy"), {
                "id": fact_id, "causal_hint": hint.causal_hint, "now": now, "agent_id": HINTS_AGENT,
                "tool": HINTS_TOOL, "session_id": args.session_id})).fetchone()
            new_id = str(new[0])  # type: ignore[index]
            scope = _scope(row["scope_id"], row["scope_name"])
            await audit(conn, AuditEntry(
                writer, scope, kind="causal_hint_added", session_id=args.session_id, fact_id=new_id,
                before={"causal_hint": None, "fact_id": fact_id},
                after={"source": row["source"], "target": row["target"], "relation": row["relation"],
                       "text": row["text"], "confidence": row["confidence"],
                       "causal_hint": hint.causal_hint, "fact_id": new_id, "quote": hint.quote},
                reason=f"{HINTS_AGENT} (the user's own model) added the causal hint '{hint.causal_hint}', "
                f"quoting the sentence: \"{hint.quote}\""))
            await emit(conn, writer, "fact.superseded", {"fact_id": new_id, "scope": row["scope_name"],
                                                         "scope_id": str(row["scope_id"]), "supersedes": fact_id})
            result.added.append(HintAdded(fact_id=fact_id, new_fact_id=new_id, causal_hint=hint.causal_hint))
    return result


def _author(chain: list[tuple[str, str]], index: int, cleared: str) -> str:
    """Who a version's claim belongs to when clearing `cleared`: a hint version is its predecessor's claim."""
    if cleared == DISTIL_AGENT:
        while chain[index][1] == HINTS_AGENT and index + 1 < len(chain):
            index += 1
    return chain[index][1]


async def clear_post_hoc(conn: psycopg.AsyncConnection, caller: Caller, args: ClearPostHocInput) -> ClearPostHocResult:
    """End every current version `args.agent` wrote (restoring the claim before it); report only unless `apply`.

    Returns empty lists when nothing of the command's is current. Raises ScopeDenied for any caller
    but the admin identity.
    """
    require_admin(caller, "clear a post-hoc command's writes")
    agents = [args.agent] if args.agent == HINTS_AGENT else sorted(POST_HOC_AGENTS)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql("current_of_agents"), {"agents": agents})
        heads: list[dict[str, Any]] = await cur.fetchall()
    now: datetime | None = None
    if args.apply and heads:
        locked = {str(h["scope_id"]) for h in heads}
        now = await _lock_scopes(conn, list(locked))
        # Read again under the locks: a writer that finished meanwhile may have ended some. A write
        # that landed meanwhile in a scope not locked here is left for the next clear.
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(sql("current_of_agents"), {"agents": agents})
            heads = [h for h in await cur.fetchall() if str(h["scope_id"]) in locked]
    chains: dict[str, list[tuple[str, str]]] = {}
    rows = await (await conn.execute(sql("chains"), {
        "heads": [h["id"] for h in heads], "scope_ids": list({h["scope_id"] for h in heads})})).fetchall()
    for head, version, agent_id in rows:
        chains.setdefault(str(head), []).append((str(version), agent_id))
    cleared: list[ClearedFact] = []
    for head in heads:
        chain = chains[str(head["id"])]
        if _author(chain, 0, args.agent) != args.agent:
            continue
        restore = next((chain[i][0] for i in range(1, len(chain)) if _author(chain, i, args.agent) != args.agent), None)
        item = ClearedFact(fact_id=str(head["id"]), scope=head["scope_name"], text=head["text"], restored_from=restore)
        if now is not None:
            await _clear_one(conn, caller, args.agent, item, _scope(head["scope_id"], head["scope_name"]), now)
        cleared.append(item)
    released: list[str] = []
    if args.agent == DISTIL_AGENT:
        statement = "release_distilled" if args.apply else "distilled_by"
        released = [str(r[0]) for r in await (await conn.execute(sql(statement), {"agent": args.agent})).fetchall()]
        if args.apply and released:
            await audit(conn, AuditEntry(
                caller, None, kind="post_hoc_cleared", post_hoc=True,
                after={"released_episode_ids": released, "agent": args.agent},
                reason=f"the admin cleared {args.agent}'s writes: {len(released)} imported turn(s) it had "
                "marked distilled are pending again"))
    return ClearPostHocResult(applied=args.apply, facts=cleared, released_episodes=released)


async def _clear_one(
    conn: psycopg.AsyncConnection, caller: Caller, agent: str, item: ClearedFact, scope: Scope, now: datetime
) -> None:
    """End one version; start a copy of the version it replaced when that one was someone else's."""
    await conn.execute(sql("end_version"), {"now": now, "id": item.fact_id, "scope_id": scope.id})
    event: dict[str, Any] = {"scope": scope.stored_name, "scope_id": scope.id}
    if item.restored_from is not None:
        row = await (await conn.execute(sql("restored_copy"), {
            "copy_of": item.restored_from, "supersedes": item.fact_id, "now": now})).fetchone()
        item.restored_fact_id = str(row[0])  # type: ignore[index]
        await emit(conn, caller, "fact.superseded", {**event, "fact_id": item.restored_fact_id,
                                                     "supersedes": item.fact_id})
        reason = (f"the admin cleared {agent}'s writes: its version ended and the claim before it "
                  f"({item.restored_from}) is current again")
    else:
        await emit(conn, caller, "fact.ended", {**event, "fact_id": item.fact_id})
        reason = f"the admin cleared {agent}'s writes: its version ended, with no earlier claim to restore"
    await audit(conn, AuditEntry(
        caller, scope, kind="post_hoc_cleared", fact_id=item.fact_id, post_hoc=True,
        before={"fact_id": item.fact_id, "text": item.text, "agent": agent},
        after={"restored_from": item.restored_from, "fact_id": item.restored_fact_id}, reason=reason))
