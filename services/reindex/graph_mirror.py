"""A Cypher-queryable mirror of entities and facts in Apache AGE, when the org database has AGE.

The relational tables stay the source of truth; the mirror is derived data, like the lexical
statistics, kept in sync from the outbox events (mirror_consumer.py) and rebuilt per scope by
`reindex` (step `graph`). Without the `age` extension installed in the database every function
here reports that and changes nothing.

Graph `echo_memory`: one `Entity` vertex per entity (id, name, type, scope) and one `FACT` edge per
fact version, source → target, with its validity: valid_from, valid_until (null while valid),
current (valid_until is null), and the claim (relation, text, confidence, causal_hint, causal,
agent_id, supersedes). Values reach Cypher as a bound agtype parameter, never spliced into the text.
Queries to try are in docs/architecture.md ("Graph mirror").
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import psycopg

GRAPH = "echo_memory"

AGE_INSTALLED = "SELECT 1 FROM pg_extension WHERE extname = 'age'"
GRAPH_EXISTS = "SELECT 1 FROM ag_catalog.ag_graph WHERE name = %s"
CREATE_GRAPH = "SELECT ag_catalog.create_graph(%s)"
# AGE's parser hook must be in the backend before a cypher() call is parsed. `LOAD 'age'` needs a
# superuser; any call into the library (here agtype's input function) loads it for everyone.
SESSION = ["SELECT 'null'::ag_catalog.agtype", 'SET LOCAL search_path = ag_catalog, "$user", public']

FACT_ROWS = """
SELECT f.id::text, f.source_entity::text, f.target_entity::text, f.relation, f.text, f.confidence,
       f.causal_hint, f.t_valid, f.t_invalid, f.agent_id, f.supersedes::text, s.name,
       se.name, se.type, te.name, te.type
FROM facts f
JOIN scopes s ON s.id = f.scope_id
JOIN entities se ON se.id = f.source_entity
JOIN entities te ON te.id = f.target_entity
WHERE f.id = ANY(%s::uuid[])
"""
SCOPE_FACT_IDS = "SELECT id::text FROM facts WHERE scope_id = %s ORDER BY t_valid, id"
SCOPE_NAME = "SELECT name FROM scopes WHERE id = %s"

# Three statements per fact version, each merged by id so replaying an event changes nothing.
# They are separate on purpose: AGE 1.5 drops SETs that follow a second MERGE in one query (the
# edge and a newly created endpoint were left without their properties).
_UPSERT_ENTITY = """
SELECT * FROM ag_catalog.cypher('echo_memory', $$
  MERGE (n:Entity {id: $id}) SET n.name = $name, n.type = $type, n.scope = $scope RETURN n.id
$$, %s) AS (id ag_catalog.agtype)
"""
_MERGE_FACT = """
SELECT * FROM ag_catalog.cypher('echo_memory', $$
  MATCH (s:Entity {id: $source_id}), (t:Entity {id: $target_id}) MERGE (s)-[r:FACT {id: $id}]->(t) RETURN r.id
$$, %s) AS (id ag_catalog.agtype)
"""
_SET_FACT = """
SELECT * FROM ag_catalog.cypher('echo_memory', $$
  MATCH ()-[r:FACT {id: $id}]->()
  SET r.relation = $relation, r.text = $text, r.confidence = $confidence, r.causal_hint = $causal_hint,
      r.causal = $causal, r.valid_from = $valid_from, r.valid_until = $valid_until, r.current = $current,
      r.agent_id = $agent_id, r.supersedes = $supersedes, r.scope = $scope
  RETURN r.id
$$, %s) AS (id ag_catalog.agtype)
"""
_DELETE_SCOPE = """
SELECT * FROM ag_catalog.cypher('echo_memory', $$
  MATCH (n:Entity {scope: $scope}) DETACH DELETE n
$$, %s) AS (n ag_catalog.agtype)
"""


async def age_installed(conn: psycopg.AsyncConnection[Any]) -> bool:
    """True when the database has the `age` extension installed (the operator's images create it)."""
    return await (await conn.execute(AGE_INSTALLED)).fetchone() is not None


async def _prepare(conn: psycopg.AsyncConnection[Any]) -> None:
    for statement in SESSION:
        await conn.execute(statement)
    if await (await conn.execute(GRAPH_EXISTS, (GRAPH,))).fetchone() is None:
        await conn.execute(CREATE_GRAPH, (GRAPH,))


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


async def mirror_facts(conn: psycopg.AsyncConnection[Any], fact_ids: list[str]) -> int:
    """Write these fact versions (and their entities) into the mirror as the tables hold them now.

    Run inside the caller's transaction. Returns how many facts were mirrored: 0 without AGE, and
    ids the tables do not hold are skipped (an event may outlive nothing, but never invents a fact).
    """
    if not fact_ids or not await age_installed(conn):
        return 0
    await _prepare(conn)
    rows = await (await conn.execute(FACT_ROWS, (fact_ids,))).fetchall()
    for (fact_id, source_id, target_id, relation, text, confidence, hint, valid_from, valid_until, agent_id,
         supersedes, scope, source_name, source_type, target_name, target_type) in rows:
        for entity_id, name, kind in ((source_id, source_name, source_type), (target_id, target_name, target_type)):
            await conn.execute(_UPSERT_ENTITY, (json.dumps({"id": entity_id, "name": name, "type": kind,
                                                            "scope": scope}),))
        await conn.execute(_MERGE_FACT, (json.dumps({"id": fact_id, "source_id": source_id,
                                                     "target_id": target_id}),))
        claim = {
            "id": fact_id, "relation": relation, "text": text, "confidence": confidence, "causal_hint": hint,
            "causal": hint is not None, "valid_from": _when(valid_from), "valid_until": _when(valid_until),
            "current": valid_until is None, "agent_id": agent_id, "supersedes": supersedes, "scope": scope,
        }
        await conn.execute(_SET_FACT, (json.dumps(claim),))
    return len(rows)


async def rebuild_scope(conn: psycopg.AsyncConnection[Any], scope_id: str | None) -> int | None:
    """Drop the scope's part of the mirror and write it again from the tables; None without AGE.

    Returns the number of fact versions mirrored. Run inside the caller's transaction (reindex holds
    the scope's write lock, so no write lands half-mirrored).
    """
    if not await age_installed(conn):
        return None
    if scope_id is None:  # a solo scope nobody has written to: nothing to mirror
        return 0
    await _prepare(conn)
    row = await (await conn.execute(SCOPE_NAME, (scope_id,))).fetchone()
    if row is None:
        return 0
    await conn.execute(_DELETE_SCOPE, (json.dumps({"scope": row[0]}),))
    ids = [str(r[0]) for r in await (await conn.execute(SCOPE_FACT_IDS, (scope_id,))).fetchall()]
    total = 0
    for start in range(0, len(ids), 500):
        total += await mirror_facts(conn, ids[start:start + 500])
    return total
