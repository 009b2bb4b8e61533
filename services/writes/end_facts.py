"""end_facts: end the current version of named edges, keeping them (validity ended, audited, mirrored).

Under the scope's write lock like every write: each edge is found by its entities' names or
aliases (case-insensitive, as resolution compares) and relation; its current version gets
`t_invalid = now`, an audit row `fact_ended` (before: the claim; reason: the caller's) and a
`fact.ended` event for the graph mirror. An edge with no current version answers `not_current`
and changes nothing, so sending the same call again is harmless.
"""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.end_facts import EndedFact, EndFactsInput, EndFactsResult
from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.core.secrets import find_secret
from echo_memory.libs.server.store.access import resolve_scope
from echo_memory.services.writes import queries as q
from echo_memory.services.writes.episode import AuditEntry, audit, emit

# The current version of one edge, its endpoints named by name or alias; locked until commit.
CURRENT_EDGE_BY_NAMES = """
SELECT f.id, f.relation, f.text, f.confidence, f.causal_hint, s.name AS source, t.name AS target
FROM facts f
JOIN entities s ON s.id = f.source_entity AND s.scope_id = %(scope_id)s
JOIN entities t ON t.id = f.target_entity AND t.scope_id = %(scope_id)s
WHERE f.scope_id = %(scope_id)s AND f.t_invalid IS NULL AND lower(f.relation) = lower(%(relation)s)
  AND (lower(s.name) = lower(%(source)s) OR EXISTS (
        SELECT 1 FROM entity_aliases a WHERE a.scope_id = %(scope_id)s AND a.entity_id = s.id
          AND lower(a.alias) = lower(%(source)s)))
  AND (lower(t.name) = lower(%(target)s) OR EXISTS (
        SELECT 1 FROM entity_aliases a WHERE a.scope_id = %(scope_id)s AND a.entity_id = t.id
          AND lower(a.alias) = lower(%(target)s)))
ORDER BY f.t_valid DESC, f.id
LIMIT 1
FOR UPDATE OF f
"""


async def end_facts(conn: psycopg.AsyncConnection, caller: Caller, args: EndFactsInput) -> EndFactsResult:
    """One result per fact: `ended` (with the version's id) or `not_current`.

    Raises InvalidArgument when a reason or the session holds a secret (nothing is ended);
    ScopeDenied or NotFound for a scope the caller may not write.
    """
    for index, fact in enumerate(args.facts, start=1):
        for where, text in (("reason", fact.reason), ("source", fact.source), ("target", fact.target)):
            kind = find_secret(text)
            if kind:
                raise InvalidArgument(f"fact {index} ({where}) contains {kind}; secrets are never stored")
    if find_secret(args.session_id):
        raise InvalidArgument("session_id contains a secret; secrets are never stored")
    scope = await resolve_scope(conn, caller, args.scope, "write")
    now = (await (await conn.execute(q.LOCK_SCOPE_THEN_NOW, (scope.id,))).fetchone())[0]  # type: ignore[index]
    results: list[EndedFact] = []
    for fact in args.facts:
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(CURRENT_EDGE_BY_NAMES, {"scope_id": scope.id, "source": fact.source,
                                                      "target": fact.target, "relation": " ".join(fact.relation.split())})
            row = await cur.fetchone()
        if row is None:
            results.append(EndedFact(outcome="not_current"))
            continue
        fact_id = str(row["id"])
        await conn.execute(q.END_EDGE, {"now": now, "id": fact_id, "scope_id": scope.id})
        before = {"source": row["source"], "target": row["target"], "relation": row["relation"], "text": row["text"],
                  "confidence": row["confidence"], "causal_hint": row["causal_hint"], "fact_id": fact_id}
        await audit(conn, AuditEntry(
            caller, scope, kind="fact_ended", session_id=args.session_id, fact_id=fact_id,
            before=before, reason=fact.reason))
        await emit(conn, caller, "fact.ended", {"fact_id": fact_id, "scope": scope.stored_name, "scope_id": scope.id})
        results.append(EndedFact(outcome="ended", fact_id=fact_id))
    return EndFactsResult(results=results, scope=scope.name)
