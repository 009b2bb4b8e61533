"""Entity resolution for write_episode: which stored entity each mention of a call means.

Rules, applied inside the scope and under the scope's write lock:
1. an `entity_resolutions` choice wins: an existing id (it must exist in the same scope, else the
   call is refused with `not_found`) or "new";
2. otherwise an exact, case-insensitive match on a stored name (how = exact) or alias
   (how = alias) resolves silently — never a substring or prefix match;
3. otherwise stored names and aliases that look like the mention (same words, initials,
   numeronym, shared word stems, nearest vectors) are judged by name_match.judge: a pair that
   differs in a number, version or qualifier word scores near 0 whatever its cosine; a score at
   or above the merge threshold (by default only case/punctuation/plural/article differences)
   resolves the mention as that entity's alias (how = variant, reported in `aliased`); a score at
   or above the deferral threshold defers the mention with its candidates;
4. otherwise the mention is a new entity.
An entity another mention of the same call names or resolves to is never a candidate: two
entities declared in one call are never resolved into each other. Mentions of one call that
share a name or alias, or resolve to the same stored entity, are one entity. Each step takes
the request's `EpisodeWrite` (write_state.py) and records its decisions on the call's Mentions:
`record_choices` and `resolve_known` run before the lock, `plan` under it and reads only;
`materialise` creates entities and learns aliases, and is called only for entities that are
endpoints of an edge the call actually writes.

Owned here: the SQL on `entities` and `entity_aliases`. Not here: facts, audit rows (episode.py).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

import psycopg
from psycopg.abc import Params

from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound
from echo_memory.libs.core.contracts.write import Candidate
from echo_memory.libs.server.telemetry import steps
from echo_memory.services.writes import name_match
from echo_memory.services.writes.write_state import Choice, EpisodeWrite, How, Mention, key

# Resolution scores (name_match.judge) at or above which a mention is deferred with candidates,
# or resolved as an alias without asking. Chosen on the dev part of the shipped labelled pairs
# (resolution_eval.py; figures in docs/BENCHMARKS.md); `echo-memory calibrate --apply` may
# record others in resolution_calibration, which `thresholds` reads.
DEFER_AT = 0.6
MERGE_AT = 0.98
NEAR_MATCH_CANDIDATES = 3
NEAREST_VECTORS = 10  # candidates by vector, beside the lexical ones
LEXICAL_LIMIT = 200

FIND_BY_NAME = """
SELECT id, name, 'exact' AS how FROM entities
WHERE scope_id = %(scope_id)s AND lower(name) = lower(%(name)s)
"""
FIND_BY_ALIAS = """
SELECT e.id, e.name, 'alias' AS how FROM entity_aliases a JOIN entities e ON e.id = a.entity_id
WHERE a.scope_id = %(scope_id)s AND e.scope_id = %(scope_id)s AND lower(a.alias) = lower(%(name)s)
ORDER BY e.created_at, e.id
LIMIT 1
"""
ENTITY_IN_SCOPE = "SELECT id, name FROM entities WHERE scope_id = %s AND id = %s"
# Candidates for one mention: the nearest names by vector, and the names and aliases that share a
# word stem, match its initials or numeronym, or that it is the initials of. Patterns are built
# from the mention's letters and digits only, and bound as parameters.
CANDIDATES = """
(SELECT id, name, type, name AS matched, 1 - (embedding <=> %(embedding)s) AS similarity FROM entities
 WHERE scope_id = %(scope_id)s AND embedding IS NOT NULL
 ORDER BY embedding <=> %(embedding)s, id
 LIMIT %(nearest)s)
UNION ALL
(SELECT id, name, type, name, 1 - (embedding <=> %(embedding)s) FROM entities
 WHERE scope_id = %(scope_id)s
   AND (lower(name) LIKE ANY(%(likes)s) OR lower(name) ~ ANY(%(regexes)s) OR lower(name) = ANY(%(exacts)s))
 ORDER BY embedding <=> %(embedding)s, id
 LIMIT %(lexical)s)
UNION ALL
(SELECT e.id, e.name, e.type, a.alias, 1 - (e.embedding <=> %(embedding)s)
 FROM entity_aliases a JOIN entities e ON e.id = a.entity_id
 WHERE a.scope_id = %(scope_id)s AND e.scope_id = %(scope_id)s
   AND (lower(a.alias) LIKE ANY(%(likes)s) OR lower(a.alias) ~ ANY(%(regexes)s)
        OR lower(a.alias) = ANY(%(exacts)s))
 ORDER BY e.embedding <=> %(embedding)s, e.id
 LIMIT %(lexical)s)
"""
# The entity each resolved id answers as now, for ids a person's merge absorbed (migration 0015).
CANONICAL = """
SELECT c.entity_id, c.canonical_id, e.name FROM entity_canonical c JOIN entities e ON e.id = c.canonical_id
WHERE c.scope_id = %(scope_id)s AND e.scope_id = %(scope_id)s AND c.entity_id = ANY(%(ids)s::uuid[])
"""
# The thresholds `echo-memory calibrate --apply` recorded last, if any (migration 0008).
APPLIED_THRESHOLDS = """
SELECT defer_at, merge_at FROM resolution_calibration WHERE applied ORDER BY computed_at DESC, id DESC LIMIT 1
"""
INSERT_ENTITY = """
INSERT INTO entities (scope_id, name, type, embedding, created_by)
VALUES (%(scope_id)s, %(name)s, %(type)s, %(embedding)s, %(agent_id)s)
RETURNING id
"""
# An alias is learned only when no entity of the scope already answers to it, so a name never
# resolves to two entities.
LEARN_ALIAS = """
INSERT INTO entity_aliases (entity_id, scope_id, alias)
SELECT %(entity_id)s, %(scope_id)s, %(alias)s
WHERE NOT EXISTS (SELECT 1 FROM entities WHERE scope_id = %(scope_id)s AND lower(name) = lower(%(alias)s))
  AND NOT EXISTS (SELECT 1 FROM entity_aliases WHERE scope_id = %(scope_id)s AND lower(alias) = lower(%(alias)s))
RETURNING alias
"""


def record_choices(w: EpisodeWrite) -> None:
    """The call's `entity_resolutions` onto their Mentions; InvalidArgument when one gets two different ones."""
    for resolution in w.args.entity_resolutions:
        mention = w.mention(resolution.mention)
        choice = Choice(resolution.entity_id.strip(), resolution.rationale)
        if mention.choice is not None and mention.choice.entity_id != choice.entity_id:
            raise InvalidArgument(
                f"entity_resolutions: '{mention.name}' is given two different resolutions in one call"
            )
        mention.choice = choice


async def resolve_known(w: EpisodeWrite) -> None:
    """Resolve by exact name or alias, before the scope lock, every mention that needs no choice.

    Safe outside the lock because a name, once it resolves, keeps resolving to the same stored
    entity: entities are never deleted, and a rename keeps the old name as an alias. A person's
    merge may redirect that entity meanwhile; `plan` follows redirects under the lock. What it buys:
    a mention resolved here needs no embedding (only new and near-matched names do), and `plan`
    does not look it up again.
    """
    for mention in w.mentions():
        if mention.referenced and mention.choice is None and mention.entity_id is None:
            found = await _exact(w, mention)
            if found is not None:
                mention.entity_id, mention.stored_name, mention.how = found


def names_to_embed(w: EpisodeWrite) -> list[str]:
    """Names some fact uses that may be near matches: neither resolved, named by id, nor already embedding."""
    early = set(w.declared_new)
    return [m.name for m in w.mentions() if m.referenced and m.needs_vector() and m.name not in early]


@dataclass(frozen=True)
class Thresholds:
    defer_at: float = DEFER_AT
    merge_at: float = MERGE_AT


async def thresholds(conn: psycopg.AsyncConnection) -> Thresholds:
    """The applied calibration's thresholds, else the shipped defaults."""
    row = await _fetch(conn, APPLIED_THRESHOLDS, {})
    if row is None:
        return Thresholds()
    return Thresholds(defer_at=float(row[0]), merge_at=float(row[1]))  # type: ignore[arg-type]


async def plan(w: EpisodeWrite) -> None:
    """Decide how each Mention resolves, under the scope lock, with the thresholds in force; reads only.

    Raises NotFound/InvalidArgument for bad choices. Only mentions some fact uses are matched
    (an entity no fact uses is never stored), but every explicit choice is checked.
    """
    w.limits = await thresholds(w.conn)
    waiting: list[Mention] = []
    for mention in w.mentions():
        choice = mention.choice
        if choice is not None and not choice.is_new:
            entity_id, stored = await _entity_by_id(w, choice.entity_id)
            mention.how, mention.entity_id, mention.stored_name = "agent-confirmed", entity_id, stored
            mention.rationale = choice.rationale
            continue
        if choice is not None:  # "new": the agent says none of the candidates is this entity
            clash = await _fetch(w.conn, FIND_BY_NAME, {"scope_id": w.scope.id, "name": mention.name})
            mention.rationale = choice.rationale
            if clash is not None:
                mention.new_but_exists = str(clash[0])
                if not mention.referenced:  # no fact of the call could make this a restatement
                    refuse_new_that_exists([mention])
                mention.entity_id, mention.stored_name, mention.how = str(clash[0]), str(clash[1]), "exact"
            continue
        if not mention.referenced or mention.entity_id is not None:
            continue  # not used by any fact, or already resolved by resolve_known
        found = await _exact(w, mention)
        if found is not None:
            mention.entity_id, mention.stored_name, mention.how = found
            continue
        waiting.append(mention)
    await follow_merges(w, w.mentions())
    # Only now are all exact resolutions of the call known, so entities the call's other mentions
    # name can be kept out of every candidate list.
    taken = w.taken()
    for mention in waiting:
        with steps.step("near_match"):
            judged = await candidates_for(w, mention, taken)
        best = judged[0] if judged else None
        if best is not None and best.score >= w.limits.merge_at:
            mention.entity_id, mention.stored_name, mention.how, mention.variant = (
                best.entity_id, best.name, "variant", best)
            taken.add(best.entity_id)
        else:
            mention.candidates = [c for c in judged if c.score >= w.limits.defer_at][:NEAR_MATCH_CANDIDATES]
    await follow_merges(w, waiting)
    _merge_same_entity(w.by_key)


async def follow_merges(w: EpisodeWrite, mentions: list[Mention]) -> None:
    """Resolved mentions whose entity a person merged into another resolve to that other entity.

    Runs under the scope's write lock (the merge verbs take it too), so a write sees a merge
    either entirely or not at all.
    """
    redirect = await _redirects(w, [m.entity_id for m in mentions if m.entity_id is not None])
    for mention in mentions:
        if mention.entity_id in redirect:
            mention.entity_id, mention.stored_name = redirect[mention.entity_id]
            if mention.variant is not None:
                mention.variant = mention.variant.model_copy(
                    update={"entity_id": mention.entity_id, "name": mention.stored_name})


def refuse_new_that_exists(planned_mentions: list[Mention]) -> None:
    """InvalidArgument when a fact to be written uses a mention declared "new" whose name is taken.

    A call whose every such fact only restates what the store holds (a retry without an
    idempotency key) passes: it answers `unchanged` like any restatement.
    """
    for mention in planned_mentions:
        if mention.new_but_exists is not None:
            raise InvalidArgument(
                f"entity_resolutions: '{mention.name}' is marked new, but entity {mention.new_but_exists} already "
                "has that name in this scope; give its id instead"
            )


def _merge_same_entity(by_key: dict[str, Mention]) -> None:
    """Two mentions that resolved to one stored entity become one Mention."""
    by_entity: dict[str, Mention] = {}
    for k, mention in list(by_key.items()):
        if mention.entity_id is None:
            continue
        first = by_entity.setdefault(mention.entity_id, mention)
        if first is not mention:
            if mention.how == "agent-confirmed":
                first.how, first.rationale = mention.how, mention.rationale
            first.new_but_exists = first.new_but_exists or mention.new_but_exists
            for alias in mention.names:
                if key(alias) not in first.keys:
                    first.keys.add(key(alias))
                    first.aliases.append(alias)
            by_key[k] = first


async def note_rejected(w: EpisodeWrite, mention: Mention, taken: set[str]) -> None:
    """For a mention the agent answered "new", the look-alikes it said no to, kept for the audit row.

    Calibration counts them as look-alikes; `taken` is the call's resolved entities, as `plan` had them.
    """
    if mention.entity_id is None and mention.choice is not None:
        with steps.step("near_match"):
            judged = await candidates_for(w, mention, taken)
        mention.rejected = [c for c in judged if c.score >= w.limits.defer_at][:NEAR_MATCH_CANDIDATES]


async def materialise(w: EpisodeWrite, mention: Mention) -> None:
    """Create the entity (how = new) or learn the call's names as aliases of the resolved one."""
    if mention.entity_id is None:
        row = await _fetch(
            w.conn,
            INSERT_ENTITY,
            {"scope_id": w.scope.id, "name": mention.name, "type": mention.type,
             "embedding": w.vectors[mention.name], "agent_id": w.caller.agent_id},
        )
        assert row is not None
        mention.entity_id, mention.stored_name, mention.created = str(row[0]), mention.name, True
    for alias in mention.names:
        if key(alias) == key(mention.stored_name or ""):
            continue
        learned = await _fetch(
            w.conn, LEARN_ALIAS, {"entity_id": mention.entity_id, "scope_id": w.scope.id, "alias": alias})
        if learned is not None:
            mention.learned.append(alias)


async def _redirects(w: EpisodeWrite, ids: list[str]) -> dict[str, tuple[str, str]]:
    """absorbed entity id -> (id, name) of the entity it answers as, for the ids a merge in force absorbed."""
    if not ids:
        return {}
    rows = await (await w.conn.execute(CANONICAL, {"scope_id": w.scope.id, "ids": ids})).fetchall()
    return {str(absorbed): (str(canonical), str(name)) for absorbed, canonical, name in rows}


async def _fetch(conn: psycopg.AsyncConnection, sql: str, params: Params) -> tuple[object, ...] | None:
    return await (await conn.execute(sql, params)).fetchone()


async def _entity_by_id(w: EpisodeWrite, entity_id: str) -> tuple[str, str]:
    try:
        uuid.UUID(entity_id)
    except ValueError:
        raise InvalidArgument(f"entity_resolutions: '{entity_id[:64]}' is not an entity id or \"new\"") from None
    row = await _fetch(w.conn, ENTITY_IN_SCOPE, (w.scope.id, entity_id))
    if row is None:
        raise NotFound(f"entity_resolutions: entity {entity_id} does not exist in scope '{w.scope.name}'")
    return str(row[0]), str(row[1])


async def _exact(w: EpisodeWrite, mention: Mention) -> tuple[str, str, How] | None:
    """The stored entity answering to one of the mention's names: stored names first, then aliases."""
    names = mention.names
    for sql in (FIND_BY_NAME, FIND_BY_ALIAS):
        for name in names:
            row = await _fetch(w.conn, sql, {"scope_id": w.scope.id, "name": name})
            if row is not None:
                return str(row[0]), str(row[1]), row[2]  # type: ignore[return-value]
    return None


async def candidates_for(w: EpisodeWrite, mention: Mention, taken: set[str]) -> list[Candidate]:
    """Stored entities the mention may name, judged by name_match and best first (one per entity).

    Entities in `taken` (named by another mention of the call) and entities whose name or alias is
    another mention's name in this call are left out: the call declared them as other entities.
    """
    likes, regexes, exacts = _lexical_patterns(mention.names)
    rows = await (
        await w.conn.execute(
            CANDIDATES,
            {"scope_id": w.scope.id, "embedding": w.vectors[mention.name], "nearest": NEAREST_VECTORS,
             "lexical": LEXICAL_LIMIT, "likes": likes, "regexes": regexes, "exacts": exacts},
        )
    ).fetchall()
    others = {k for k, m in w.by_key.items() if m is not mention}
    # An entity a person merged into another is a candidate as that other entity (its name is an
    # alias of it now), so the agent is never offered an absorbed id.
    redirect = await _redirects(w, list({str(r[0]) for r in rows}))
    best: dict[str, Candidate] = {}
    for entity_id, name, type_, matched, similarity in rows:
        entity_id, name = redirect.get(str(entity_id), (str(entity_id), str(name)))
        if entity_id in taken or key(str(name)) in others or key(str(matched)) in others:
            continue
        cosine = float(similarity) if similarity is not None else 0.0
        kind = name_match.kind_of(mention.type, str(type_))
        for own in mention.names:
            judgement = name_match.judge(own, str(matched), cosine, kind=kind)
            candidate = Candidate(entity_id=entity_id, name=str(name), similarity=round(cosine, 4),
                                  score=judgement.score, rule=judgement.rule, matched_name=str(matched))
            if entity_id not in best or candidate.score > best[entity_id].score:
                best[entity_id] = candidate
    return sorted(best.values(), key=lambda c: (-c.score, -c.similarity, c.entity_id))


def _lexical_patterns(names: list[str]) -> tuple[list[str], list[str], list[str]]:
    """LIKE patterns (word stems), regexes (initials, numeronyms) and exact names a look-alike may have."""
    likes: set[str] = set()
    regexes: set[str] = set()
    exacts: set[str] = set()
    for name in names:
        words = [w for w in name_match.tokens(name) if w.isalnum()]
        for word in words:
            if len(word) >= 3 and word.isalpha():
                likes |= {f"%{word[:3]}%", f"%{word[-3:]}%"}
            if re.fullmatch(r"[a-z]\d+[a-z]", word):  # k8s: any word of that shape
                regexes.add(f"(^|[^a-z]){word[0]}[a-z]{{{int(word[1:-1])}}}{word[-1]}([^a-z]|$)")
        letters = [w for w in words if w.isalpha()]
        if len(letters) == 1 and 2 <= len(letters[0]) <= 6:  # AWS: words starting with a, w, s
            regexes.add("^" + r"[^a-z]+".join(f"{c}[a-z]*" for c in letters[0]) + "$")
            regexes.add("^" + r"[^a-z]*".join(f"{c}[a-z]*" for c in letters[0]) + "$")  # camel: TensorFlow
        if len(letters) >= 2:
            exacts.add("".join(w[0] for w in letters if w not in name_match.ARTICLES))
        for word in letters:
            if len(word) >= 4:
                exacts.add(f"{word[0]}{len(word) - 2}{word[-1]}")
    return sorted(likes), sorted(regexes), sorted(exacts)
