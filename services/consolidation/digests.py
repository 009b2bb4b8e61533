"""Entity digests: what memory holds about one entity, built from its current facts. No model.

A digest quotes stored sentences and counts; it cannot say anything its member facts do not. It is
a router to those facts, not an answer: each digest lists its members and a hash of them, and is
versioned like a fact, so an unchanged member set keeps its version and a rebuild from the same
facts gives the same summary, hash and vector.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.config.consolidation import ConsolidationSettings
from echo_memory.libs.server.embed import count_tokens
from echo_memory.services.consolidation import queries as q
from echo_memory.services.consolidation import topics
from echo_memory.services.consolidation.loop import execute_in_slices, fetch_all


@dataclass(frozen=True)
class MemberFact:
    id: str
    source: str
    target: str
    relation: str
    text: str
    written_at: datetime
    project: str | None
    session: str | None
    supersedes: str | None
    embedding: np.ndarray

    @cached_property
    def unit(self) -> np.ndarray:
        """The stored vector at unit length, computed once for the topics, areas and summaries."""
        return _unit(self.embedding)


@dataclass(frozen=True)
class Entity:
    id: str
    name: str
    type: str


@dataclass(frozen=True)
class DigestDraft:
    kind: str  # entity | topic | area
    subject_id: str
    member_ids: list[str]
    member_hash: str
    summary: str
    token_count: int
    projects: list[str]
    first_seen: datetime
    last_seen: datetime
    embedding: np.ndarray
    parts: tuple[str, ...] = ()  # of an area: the subject ids of the topics it groups, sorted


def _vector(value: Any) -> np.ndarray:
    """A stored vector as float32, whether the driver gives a pgvector `Vector` or an array."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)


def member_hash(member_ids: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(member_ids)).encode()).hexdigest()


def _day(moment: datetime) -> str:
    return moment.date().isoformat()


def draft(entity: Entity, members: list[MemberFact], names: dict[str, Entity],
          ended: dict[str, tuple[str, datetime | None]], policy: ConsolidationSettings) -> DigestDraft:
    """The digest of `entity` over its current `members` (sorted by id); `ended` maps a superseded
    fact's id to its text and end, for the digest's last changes."""
    members = sorted(members, key=lambda m: m.id)
    first = min(m.written_at for m in members)
    last = max(m.written_at for m in members)
    lines = [f"{entity.name} ({entity.type}): {len(members)} current facts, first seen {_day(first)}, "
             f"last seen {_day(last)}."]
    by_relation: dict[str, list[MemberFact]] = defaultdict(list)
    for member in members:
        by_relation[member.relation].append(member)
    relations = sorted(by_relation, key=lambda r: (-len(by_relation[r]), r))[: policy.digest_relations]
    for relation in relations:
        facts = sorted(by_relation[relation], key=lambda m: (m.written_at, m.id), reverse=True)
        quoted = "; ".join(m.text for m in facts[: policy.digest_facts_per_relation])
        more = len(facts) - policy.digest_facts_per_relation
        lines.append(f"- {relation}: {quoted}" + (f" (+{more} more)" if more > 0 else ""))
    if len(by_relation) > len(relations):
        lines.append(f"- and {len(by_relation) - len(relations)} other relations")
    neighbours = Counter(
        other for m in members for other in (m.source, m.target) if other != entity.id and other in names
    )
    top = sorted(neighbours.items(), key=lambda kv: (-kv[1], names[kv[0]].name, kv[0]))[: policy.digest_neighbours]
    if top:
        lines.append("Often with: " + ", ".join(f"{names[e].name} ({n})" for e, n in top) + ".")
    changes = sorted((m for m in members if m.supersedes in ended), key=lambda m: (m.written_at, m.id), reverse=True)
    for change in changes[:2]:
        old_text, _ = ended[change.supersedes or ""]
        lines.append(f'Changed {_day(change.written_at)}: "{old_text}" -> "{change.text}"')
    return _draft("entity", entity.id, members, "\n".join(lines))


def _mean_vector(members: list[MemberFact]) -> np.ndarray:
    """The normalised mean of the members' stored vectors, summed in member order (so rebuilds match)."""
    vectors = np.stack([m.embedding for m in members]).astype(np.float64)
    mean = vectors.sum(axis=0) / len(members)
    norm = float(np.linalg.norm(mean))
    unit: np.ndarray = (mean / norm if norm > 0 else mean).astype(np.float32)
    return unit


def _draft(kind: str, subject_id: str, members: list[MemberFact], summary: str,
           parts: tuple[str, ...] = ()) -> DigestDraft:
    members = sorted(members, key=lambda m: m.id)
    ids = [m.id for m in members]
    projects = sorted({m.project for m in members if m.project})
    first = min(m.written_at for m in members)
    last = max(m.written_at for m in members)
    return DigestDraft(kind, subject_id, ids, member_hash(ids), summary, count_tokens(summary), projects, first, last,
                       _mean_vector(members), parts)


def topic_drafts(facts: list[MemberFact], names: dict[str, Entity], policy: ConsolidationSettings) -> list[DigestDraft]:
    """A digest for every topic the current facts form (topics.py), singletons included, so every
    current fact is reachable through at least one digest; in the order the topics were opened."""
    ordered = sorted(facts, key=lambda m: (m.written_at, m.id))
    words = _name_words(names)
    placeable = [topics.Placeable(m.id, _keys([m]), m.unit, _name_pairs([m], words)) for m in ordered]
    drafts = []
    for group in topics.place(placeable, policy.topic_threshold, policy.topic_cap):
        members = [ordered[i] for i in group]
        drafts.append(_draft("topic", topics.topic_id(members[0].id), members,
                             _summary(members, names, policy.topic_sentences, "Topic")))
    return drafts


def area_drafts(topic_digests: list[DigestDraft], facts: dict[str, MemberFact], names: dict[str, Entity],
                policy: ConsolidationSettings) -> list[DigestDraft]:
    """The second level: topics (in the order they were opened) grouped as topics group facts, by
    their centres, a shared entity or session, no look-alikes and at most `area_cap` topics. Only a
    group of two or more topics becomes an area; a lone topic is its own top node. Empty when the
    scope has fewer than two topics that belong together."""
    words = _name_words(names)
    placeable = []
    for topic in topic_digests:
        members = [facts[i] for i in topic.member_ids]
        placeable.append(topics.Placeable(topic.subject_id, _keys(members), topic.embedding, _name_pairs(members, words)))
    drafts = []
    for group in topics.place(placeable, policy.area_threshold, policy.area_cap):
        if len(group) < 2:
            continue
        parts = [topic_digests[i] for i in group]
        members = sorted((facts[i] for part in parts for i in part.member_ids), key=lambda m: (m.written_at, m.id))
        text = _summary(members, names, policy.topic_sentences, f"Area of {len(parts)} topics")
        drafts.append(_draft("area", topics.area_id(parts[0].subject_id), members, text,
                             tuple(sorted(part.subject_id for part in parts))))
    return drafts


def _name_words(names: dict[str, Entity]) -> dict[str, tuple[str, ...]]:
    return {e.id: topics.name_words(e.name) for e in names.values()}


def _keys(members: list[MemberFact]) -> tuple[str, ...]:
    """What a topic or an area must share with what joins it: entities and sessions, in first-seen order."""
    keys = (k for m in members for k in (m.source, m.target, *((f"session:{m.session}",) if m.session else ())))
    return tuple(dict.fromkeys(keys))


def _name_pairs(members: list[MemberFact], words: dict[str, tuple[str, ...]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    ids = dict.fromkeys(e for m in members for e in (m.source, m.target))
    return tuple((e, words[e]) for e in ids if e in words)


def _summary(members: list[MemberFact], names: dict[str, Entity], sentences: int, heading: str) -> str:
    vectors = np.stack([m.unit for m in members]).astype(np.float64)
    entity_names = [names[e].name for m in members for e in (m.source, m.target) if e in names]
    return topics.summary([m.text for m in members], vectors, entity_names,
                          _day(min(m.written_at for m in members)), _day(max(m.written_at for m in members)),
                          [m.relation for m in members], sentences, heading)


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


async def drafts_for_scope(conn: psycopg.AsyncConnection, scope_id: str,
                           policy: ConsolidationSettings) -> list[DigestDraft]:
    """A draft for every entity of the scope that at least `digest_min_facts` current facts touch,
    for every topic of its current facts, and for every area of two or more topics. The drafting
    runs in a worker thread (loop.py)."""
    async with conn.cursor(row_factory=dict_row) as cur:
        # Binary: a vector arrives as its bytes; parsing 100k of them from text cost seconds of CPU.
        await cur.execute(q.CURRENT_FACTS, {"scope_id": scope_id}, binary=True)
        rows = await fetch_all(cur)
    if not rows:
        return []
    facts, touching = await asyncio.to_thread(_by_entity, rows)
    del rows  # the fetched rows (vectors as bytes: ~2.5 KB a fact) are not needed while drafting
    subjects = sorted(e for e, members in touching.items() if len(members) >= policy.digest_min_facts)
    names = await _entities(conn, scope_id, sorted(touching))
    ended = await _ended(conn, scope_id, sorted({m.supersedes for s in subjects for m in touching[s] if m.supersedes}))
    return await asyncio.to_thread(_all_drafts, Scope(facts, touching, subjects, names, ended), policy)


@dataclass(frozen=True)
class Scope:
    """What a scope's digests are drafted from: its current facts, those touching each entity, the
    entities that get a digest, their names and the texts of the facts their members superseded."""

    facts: list[MemberFact]
    touching: dict[str, list[MemberFact]]
    subjects: list[str]
    names: dict[str, Entity]
    ended: dict[str, tuple[str, datetime | None]]


def _by_entity(rows: list[dict[str, Any]]) -> tuple[list[MemberFact], dict[str, list[MemberFact]]]:
    facts = [MemberFact(r["id"], r["source"], r["target"], r["relation"], r["text"], r["written_at"], r["project"],
                        r["session"], r["supersedes"], _vector(r["embedding"])) for r in rows]
    touching: dict[str, list[MemberFact]] = defaultdict(list)
    for fact in facts:
        touching[fact.source].append(fact)
        if fact.target != fact.source:
            touching[fact.target].append(fact)
    return facts, touching


def _all_drafts(scope: Scope, policy: ConsolidationSettings) -> list[DigestDraft]:
    entity_drafts = [draft(scope.names[s], scope.touching[s], scope.names, scope.ended, policy)
                     for s in scope.subjects if s in scope.names]
    topic_digests = topic_drafts(scope.facts, scope.names, policy)
    areas = area_drafts(topic_digests, {f.id: f for f in scope.facts}, scope.names, policy)
    return entity_drafts + topic_digests + areas


async def _entities(conn: psycopg.AsyncConnection, scope_id: str, ids: list[str]) -> dict[str, Entity]:
    async with conn.cursor() as cur:
        await cur.execute(q.ENTITY_NAMES, {"scope_id": scope_id, "ids": ids})
        return {row[0]: Entity(row[0], row[1], row[2]) for row in await cur.fetchall()}


async def _ended(conn: psycopg.AsyncConnection, scope_id: str, ids: list[str]) -> dict[str, tuple[str, datetime | None]]:
    if not ids:
        return {}
    async with conn.cursor() as cur:
        await cur.execute(q.SUPERSEDED_TEXTS, {"scope_id": scope_id, "ids": ids})
        return {row[0]: (row[1], row[2]) for row in await cur.fetchall()}


@dataclass(frozen=True)
class DigestCounts:
    built: int
    ended: int
    unchanged: int


async def store_digests(conn: psycopg.AsyncConnection, scope_id: str, run_id: str,
                        drafts: list[DigestDraft]) -> DigestCounts:
    """Start a version for every new or changed digest and end those whose subject no longer
    qualifies; an identical member set and summary keeps the current version."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.CURRENT_DIGESTS, {"scope_id": scope_id})
        current: dict[tuple[str, str], dict[str, Any]] = {(r["kind"], r["subject_id"]): r for r in await cur.fetchall()}
    async with conn.cursor() as plain:
        await plain.execute(q.LAST_VERSIONS, {"scope_id": scope_id})
        last_version: dict[tuple[str, str], int] = {(row[0], row[1]): row[2] for row in await plain.fetchall()}
    unchanged = 0
    wanted = {(d.kind, d.subject_id) for d in drafts}
    ending: list[dict[str, Any]] = []
    starting: list[dict[str, Any]] = []
    for d in drafts:
        now = current.get((d.kind, d.subject_id))
        if (now is not None and now["member_hash"] == d.member_hash and now["summary"] == d.summary
                and tuple(now["parts"]) == d.parts):
            unchanged += 1
            continue
        if now is not None:
            ending.append({"id": now["id"], "scope_id": scope_id, "run_id": run_id})
        starting.append({
            "scope_id": scope_id, "kind": d.kind, "subject_id": d.subject_id,
            "version": last_version.get((d.kind, d.subject_id), 0) + 1,
            "member_ids": d.member_ids, "member_hash": d.member_hash, "summary": d.summary,
            "token_count": d.token_count, "projects": d.projects, "first_seen": d.first_seen,
            "last_seen": d.last_seen, "embedding": d.embedding, "run_id": run_id, "parts": list(d.parts),
        })
    gone = [{"id": row["id"], "scope_id": scope_id, "run_id": run_id}
            for subject, row in current.items() if subject not in wanted]
    # Pipelined, not a round trip per digest (tens of thousands at 1M facts), in slices (loop.py).
    async with conn.cursor() as cur:
        for sql, batch in ((q.END_DIGEST, ending + gone), (q.INSERT_DIGEST, starting)):
            await execute_in_slices(cur, sql, batch)
    return DigestCounts(len(starting), len(gone), unchanged)
