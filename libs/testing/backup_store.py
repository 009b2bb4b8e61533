"""A synthetic store of any size, COPYed straight into an org database, and per-table checksums.

For export/import tests and lab/backup_bench.py: every exported table gets rows (two scopes,
agents, entities with aliases, episodes, facts with superseded versions, reads with results,
saves, a document with an ingestion, and an audit row per change), with embeddings drawn from a
small pool of random unit vectors (the values do not matter to a backup, only that they survive).
`table_checksums` says whether two databases hold the same rows.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
from psycopg import sql

SCOPE_NAMED = "team-a"
AGENTS = ("claude-code", "cursor", "codex")
VECTOR_POOL = 256
RELATION_PAD = "x" * 60  # makes a fact's text about as long as a real one

INSERT_SCOPE = "INSERT INTO scopes (name, kind, description) VALUES (%s, 'named', 'synthetic') RETURNING id"
SCOPE_ID = "SELECT id FROM scopes WHERE name = %s"
INSERT_AGENT = "INSERT INTO agents (id, description) VALUES (%s, 'synthetic') ON CONFLICT (id) DO NOTHING"
RECORD_MODEL = ("INSERT INTO scope_embeddings (scope_id, model) VALUES (%s, 'all-MiniLM-L6-v2-int8') "
                "ON CONFLICT (scope_id) DO NOTHING")
COPY_ENTITIES = "COPY entities (id, scope_id, name, type, embedding, created_by, created_at) FROM STDIN"
COPY_ALIASES = "COPY entity_aliases (entity_id, scope_id, alias, created_at) FROM STDIN"
COPY_EPISODES = ("COPY episodes (id, scope_id, kind, agent_id, tool, project, session_id, content, written_at, "
                 "metadata, embedding, token_count) FROM STDIN")
COPY_FACTS = ("COPY facts (id, scope_id, episode_id, source_entity, target_entity, relation, text, confidence, "
              "t_valid, t_invalid, supersedes, agent_id, tool, project, session_id, written_at, embedding, "
              "token_count) FROM STDIN")
COPY_READS = "COPY reads (id, agent_id, tool, query, scopes, tokens, created_at) FROM STDIN"
COPY_READ_RESULTS = "COPY read_results (read_id, item_id, item_kind, rank, score) FROM STDIN"
COPY_SAVES = "COPY recall_saves (id, fact_id, read_id, agent_id, note, created_at) FROM STDIN"
COPY_AUDIT = ("COPY audit_log (scope_id, kind, agent_id, tool, fact_id, entity_id, before, after, reason, created_at) "
              "FROM STDIN")
INSERT_DOCUMENT = """
INSERT INTO documents (id, project, path, content_hash, content, size, registered_at)
VALUES (%s, 'ops', 'README.md', 'sha256:synthetic', %s, %s, %s)
"""
INSERT_INGESTION = "INSERT INTO document_ingestions (document_id, agent_id, content_hash, ingested_at) VALUES (%s, %s, %s, %s)"

# Every table an export holds, each ordered by its whole row so equal content gives equal sums.
CHECKED_TABLES = ("scopes", "scope_embeddings", "agents", "entities", "entity_aliases", "episodes", "facts",
                  "reads", "read_results", "recall_saves", "documents", "document_ingestions", "audit_log")
TABLE_CHECKSUM = sql.SQL("SELECT count(*), md5(coalesce(string_agg({row}, '|' ORDER BY {row}), '')) FROM {table} t")
# What a backup carries of each table: the whole row, except when a restore records its own time.
WHOLE_ROW = sql.SQL("t::text")
CHECKED_ROW = {"scope_embeddings": sql.SQL("(t.scope_id, t.model)::text")}


@dataclass(frozen=True)
class StoreSize:
    """How many rows of each kind `build_store` writes."""

    facts: int
    superseded: int  # facts later replaced by a new version (each adds one more fact row)
    reads: int
    results_per_read: int = 5
    facts_per_episode: int = 10
    facts_per_entity: int = 3


async def build_store(database_url: str, size: StoreSize, *, seed: int = 7) -> dict[str, int]:
    """Write the synthetic store in one transaction; returns the rows written per table.

    Raises psycopg errors if the database is not migrated or already holds the named scope.
    """
    rng = np.random.default_rng(seed)
    pool = rng.standard_normal((VECTOR_POOL, 384)).astype(np.float32)
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    vectors = ["[" + ",".join(f"{v:.6f}" for v in row) + "]" for row in pool]
    start = datetime(2025, 1, 1, tzinfo=UTC)
    clock = iter(start + timedelta(milliseconds=i) for i in range(10**9))
    written: dict[str, int] = {}
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        shared = (await (await conn.execute(SCOPE_ID, ("shared",))).fetchone())[0]  # type: ignore[index]
        named = (await (await conn.execute(INSERT_SCOPE, (SCOPE_NAMED,))).fetchone())[0]  # type: ignore[index]
        for agent in AGENTS:
            await conn.execute(INSERT_AGENT, (agent,))
        for scope in (shared, named):
            await conn.execute(RECORD_MODEL, (scope,))
        scopes = [shared, named]
        n_entities = max(2, size.facts // size.facts_per_entity)
        entities = [(uuid.uuid4(), scopes[i % 2]) for i in range(n_entities)]
        by_scope = {s: [e for e, es in entities if es == s] for s in scopes}
        audit: list[tuple[object, ...]] = []
        async with conn.cursor() as cur:
            async with cur.copy(COPY_ENTITIES) as copy:
                for i, (ident, scope) in enumerate(entities):
                    at = next(clock)
                    await copy.write_row((ident, scope, f"Entity {i}", "service", vectors[i % VECTOR_POOL],
                                          AGENTS[i % 3], at))
                    audit.append((scope, "entity_created", AGENTS[i % 3], "write_episode", None, ident, None,
                                  json.dumps({"name": f"Entity {i}"}), "new entity", at))
            async with cur.copy(COPY_ALIASES) as copy:
                for i, (ident, scope) in enumerate(entities[::5]):
                    await copy.write_row((ident, scope, f"E{i * 5}", next(clock)))
            n_episodes = max(1, -(-size.facts // size.facts_per_episode))
            episodes = [(uuid.uuid4(), scopes[i % 2]) for i in range(n_episodes)]
            async with cur.copy(COPY_EPISODES) as copy:
                for i, (ident, scope) in enumerate(episodes):
                    content = f"Episode {i}: the agent wrote ten facts about services and their databases."
                    await copy.write_row((ident, scope, "write", AGENTS[i % 3], "write_episode", "demo", f"s-{i}",
                                          content, next(clock), json.dumps({"n": i}), vectors[(i * 3) % VECTOR_POOL],
                                          14))
            facts = await _copy_facts(cur, size, episodes, by_scope, vectors, clock, audit)
            reads = [uuid.uuid4() for _ in range(size.reads)]
            saves = 0
            async with cur.copy(COPY_READS) as copy:
                for i, ident in enumerate(reads):
                    await copy.write_row((ident, AGENTS[i % 3], "query_memory", f"question {i}",
                                          ["shared", SCOPE_NAMED] if i % 2 else ["shared"], 120, next(clock)))
            async with cur.copy(COPY_READ_RESULTS) as copy:
                for i, ident in enumerate(reads):
                    for rank in range(size.results_per_read):
                        fact_id = facts[(i * 13 + rank * 7) % len(facts)][0]
                        await copy.write_row((ident, fact_id, "fact", rank + 1, 0.9 - rank * 0.05))
            async with cur.copy(COPY_SAVES) as copy:
                for i, ident in enumerate(reads[::10]):
                    fact_id, scope = facts[(i * 130) % len(facts)]
                    at = next(clock)
                    save = uuid.uuid4()
                    await copy.write_row((save, fact_id, ident, AGENTS[i % 3], "this answered it", at))
                    audit.append((scope, "recall_saved", AGENTS[i % 3], "record_recall_save", fact_id, None, None,
                                  json.dumps({"save_id": str(save)}), "saved", at))
                    saves += 1
            async with cur.copy(COPY_AUDIT) as copy:
                for row in audit:
                    await copy.write_row(row)
        document = uuid.uuid4()
        content = "# Ops\n" + "All about operations.\n" * 20
        await conn.execute(INSERT_DOCUMENT, (document, content, len(content), next(clock)))
        await conn.execute(INSERT_INGESTION, (document, AGENTS[0], "sha256:synthetic", next(clock)))
        await conn.commit()
    written.update(entities=len(entities), episodes=len(episodes), facts=len(facts), reads=len(reads),
                   read_results=len(reads) * size.results_per_read, recall_saves=saves, audit_log=len(audit),
                   documents=1)
    return written


async def _copy_facts(
    cur: psycopg.AsyncCursor[object], size: StoreSize, episodes: list[tuple[uuid.UUID, uuid.UUID]],
    by_scope: dict[uuid.UUID, list[uuid.UUID]], vectors: list[str], clock: Iterator[datetime],
    audit: list[tuple[object, ...]],
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """COPY the facts: `size.facts` first versions, the first `size.superseded` of them ended and
    replaced by a second version (same edge, `supersedes` set). Returns (fact id, scope id)."""
    first: list[tuple[uuid.UUID, uuid.UUID, uuid.UUID, uuid.UUID, uuid.UUID, str, datetime]] = []
    for i in range(size.facts):
        episode, scope = episodes[i // size.facts_per_episode]
        members = by_scope[scope]
        source, target = members[i % len(members)], members[(i * 7 + 1) % len(members)]
        first.append((uuid.uuid4(), scope, episode, source, target, f"relates-{i}", next(clock)))
    ended_at = {row[0]: next(clock) for row in first[: size.superseded]}
    out: list[tuple[uuid.UUID, uuid.UUID]] = []
    async with cur.copy(COPY_FACTS) as copy:
        for n, (ident, scope, episode, source, target, relation, at) in enumerate(first):
            text = f"Entity {n} {relation} another entity {RELATION_PAD}."
            agent = AGENTS[n % 3]
            await copy.write_row((ident, scope, episode, source, target, relation, text, "extracted", at,
                                  ended_at.get(ident), None, agent, "write_episode", "demo", f"s-{n}", at,
                                  vectors[n % VECTOR_POOL], 20))
            audit.append((scope, "fact_created", agent, "write_episode", ident, None, None,
                          json.dumps({"fact_id": str(ident), "text": text}), "new claim", at))
            out.append((ident, scope))
        for n, (ident, scope, episode, source, target, relation, _) in enumerate(first[: size.superseded]):
            at = ended_at[ident]
            text = f"Entity {n} {relation} a changed entity {RELATION_PAD}."
            new = uuid.uuid4()
            await copy.write_row((new, scope, episode, source, target, relation, text, "extracted", at, None, ident,
                                  AGENTS[(n + 1) % 3], "write_episode", "demo", f"s2-{n}", at,
                                  vectors[(n + 17) % VECTOR_POOL], 20))
            audit.append((scope, "fact_superseded", AGENTS[(n + 1) % 3], "write_episode", new, None,
                          json.dumps({"fact_id": str(ident)}), json.dumps({"fact_id": str(new), "text": text}),
                          "the claim changed", at))
            out.append((new, scope))
    return out


def table_checksums(database_url: str) -> dict[str, tuple[int, str]]:
    """(row count, md5 of every row in order) per exported table; `scope_embeddings.recorded_at`
    is left out (an import records when it restored the model)."""
    with psycopg.connect(database_url) as conn:
        out: dict[str, tuple[int, str]] = {}
        for table in CHECKED_TABLES:
            query = TABLE_CHECKSUM.format(table=sql.Identifier(table), row=CHECKED_ROW.get(table, WHOLE_ROW))
            row = conn.execute(query).fetchone()
            assert row is not None
            out[table] = (int(row[0]), str(row[1]))
        return out
