"""why: the whole trail of one fact, for `echo-memory why FACT_ID`.

Reads only: every version of the claim (following `supersedes` both ways), who wrote each and
through which tool, project and session, how each entity was resolved, every read that returned
a version and every save, and the merges, unmerges and renames a person made of its entities.
A fact in a scope the caller may not read is reported as not found, the same as an unknown id,
so ids do not reveal other scopes' contents.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.audit import (
    IDENTITY_KINDS,
    EntityTrail,
    FactVersion,
    ReadOfFact,
    SaveOfFact,
    WhyInput,
    WhyResult,
)
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.common import Provenance
from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound
from echo_memory.libs.server.store.access import public_name
from echo_memory.services.audit import queries as q
from echo_memory.services.audit.access import readable_scopes
from echo_memory.services.audit.log import entry_from_row


async def why(conn: psycopg.AsyncConnection, caller: Caller, args: WhyInput) -> WhyResult:
    """The trail of `args.fact_id`.

    Raises InvalidArgument when the id is not a UUID; NotFound when no fact with that id is in a
    scope the caller may read.
    """
    try:
        fact_id = str(uuid.UUID(args.fact_id))
    except ValueError:
        raise InvalidArgument(f"fact_id '{args.fact_id[:64]}' is not a fact id (a UUID)") from None
    readable = await readable_scopes(conn, caller)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.FACT_IN_SCOPES, {"fact_id": fact_id, "scope_ids": [s.id for s in readable]})
        found = await cur.fetchone()
        if found is None:
            raise NotFound(f"no fact {fact_id} in the scopes this token may read")
        scope_id, stored = str(found["scope_id"]), found["scope_name"]
        public = public_name(stored)
        base = {"fact_id": fact_id, "scope_id": scope_id}

        await cur.execute(q.FACT_VERSIONS, base)
        rows = await cur.fetchall()
        versions = [_version(r, public, asked=str(r["id"]) == fact_id) for r in rows]
        ids = [v.fact_id for v in versions]
        asked = next(r for r in rows if str(r["id"]) == fact_id)

        entities = []
        for role in ("source", "target"):
            entity_id = str(asked[f"{role}_entity"])
            await cur.execute(q.ENTITY, {"scope_id": scope_id, "entity_id": entity_id})
            e = await cur.fetchone()
            params = {"scope_id": scope_id, "entity_id": entity_id, "identity_kinds": list(IDENTITY_KINDS)}
            await cur.execute(q.ENTITY_AUDIT, params)
            resolutions = [entry_from_row(a) for a in await cur.fetchall()]
            await cur.execute(q.ENTITY_IDENTITY, params)
            identity = [entry_from_row(a) for a in await cur.fetchall()]
            await cur.execute(q.ENTITY_MERGED_INTO, params)
            merged = await cur.fetchone()
            assert e is not None  # facts reference entities by foreign key
            entities.append(EntityTrail(
                entity_id=entity_id, role=role, name=e["name"], type=e["type"], aliases=list(e["aliases"]),
                created_by=e["created_by"], created_at=e["created_at"], resolutions=resolutions,
                identity=identity, merged_into=str(merged["canonical_id"]) if merged else None,
            ))

        await cur.execute(q.READS_OF_FACTS, {"fact_ids": ids, "scope_name": stored})
        reads = [ReadOfFact(read_id=str(r["read_id"]), fact_id=str(r["item_id"]), agent_id=r["agent_id"],
                            tool=r["tool"], query=r["query"], as_of=r["as_of"], rank=r["rank"],
                            score=float(r["score"]), created_at=r["created_at"]) for r in await cur.fetchall()]
        await cur.execute(q.SAVES_OF_FACTS, {"fact_ids": ids, "scope_id": scope_id})
        saves = [SaveOfFact(save_id=str(r["id"]), fact_id=str(r["fact_id"]),
                            read_id=str(r["read_id"]) if r["read_id"] else None, agent_id=r["agent_id"],
                            note=r["note"], created_at=r["created_at"]) for r in await cur.fetchall()]
        await cur.execute(q.FACTS_AUDIT, {"fact_ids": ids, "scope_id": scope_id})
        audit = [entry_from_row(r) for r in await cur.fetchall()]

    written_by = next(v.provenance for v in versions if v.is_asked)
    return WhyResult(fact_id=fact_id, scope=public, written_by=written_by, versions=versions, entities=entities,
                     reads=reads, saves=saves, audit=audit)


def _version(r: dict[str, Any], scope: str, *, asked: bool) -> FactVersion:
    return FactVersion(
        fact_id=str(r["id"]), text=r["text"], source=r["source"], target=r["target"], relation=r["relation"],
        confidence=r["confidence"], causal_hint=r["causal_hint"], hint_origin=r["hint_origin"],
        supersedes=str(r["supersedes"]) if r["supersedes"] else None,
        episode_id=str(r["episode_id"]) if r["episode_id"] else None,
        provenance=Provenance(agent_id=r["agent_id"], tool=r["tool"], project=r["project"],
                              session_id=r["session_id"], written_at=r["written_at"], valid_from=r["t_valid"],
                              valid_until=r["t_invalid"], scope=scope),
        is_asked=asked, flags=list(r.get("flags") or []),
    )
