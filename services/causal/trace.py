"""trace_cause: resolve the topic to entities, walk hinted facts, return ordered cause → effect chains.

Owns the walk only; it reads facts and never writes (trace_cause logs no read: it returns chains,
not a ranked recall, and saves refer to query_memory reads). Called by the causal handler inside
one read transaction.

Steps are merged by (cause, effect, polarity), so "A led_to B" and "B caused_by A" — whoever wrote
them — are one step whose evidence lists both facts. A chain is the longest simple path through a
topic entity: an upstream part (causes) and a downstream part (effects), each at most `max_depth`
steps; `direction` keeps only the upstream part (`causes`) or only the downstream part (`effects`).
A step that would revisit an entity already on the path closes a loop: it is not followed, and the
loop is reported in `cycles`.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.causal import (
    Chain,
    ChainStep,
    Contradiction,
    CutCycle,
    EmptyKind,
    MatchedEntity,
    Polarity,
    StepEvidence,
    StepHint,
    TopicResolution,
    TraceCauseInput,
    TraceCauseResult,
)
from echo_memory.libs.core.contracts.common import Provenance
from echo_memory.libs.core.contracts.instants import parse_span
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.store.access import Scope, public_name, resolve_read_scopes
from echo_memory.libs.server.telemetry import db_span
from echo_memory.services.causal import queries as q

# Free text falls back to the entities of the nearest facts, but only of facts at least this
# close: MiniLM puts unrelated sentences below ~0.25 and paraphrases above ~0.45.
DENSE_FLOOR = 0.35
DENSE_HITS = 3
# Guards against hostile or huge graphs: the walk loads at most this many hinted facts, and
# enumerates at most this many paths per direction per topic entity; `truncated` says so.
MAX_EDGES = 5000
MAX_PATHS = 100

# hint → (cause is source?, polarity)
_NORMALISE: dict[str, tuple[bool, Polarity]] = {
    "led_to": (True, "causing"),
    "caused_by": (False, "causing"),
    "enabled_by": (False, "enabling"),
    "blocked_by": (False, "blocking"),
}
_SPLIT = re.compile(r"\s*(?:,|;|\band\b)\s*", re.IGNORECASE)

StepKey = tuple[str, str, str]  # (cause id, effect id, polarity)


@dataclass
class _Step:
    cause: str
    effect: str
    polarity: Polarity
    cause_name: str
    effect_name: str
    evidence: list[StepEvidence] = field(default_factory=list)

    @property
    def key(self) -> StepKey:
        return (self.cause, self.effect, self.polarity)

    def to_model(self) -> ChainStep:
        first, *rest = self.evidence
        return ChainStep(
            fact_id=first.fact_id, text=first.text, hint=first.hint, polarity=self.polarity,
            from_=self.cause_name, to=self.effect_name, from_entity_id=self.cause, to_entity_id=self.effect,
            provenance=first.provenance, also_stated_by=rest,
        )


async def trace_cause(
    conn: psycopg.AsyncConnection, caller: Caller, args: TraceCauseInput, embedder: MiniLM
) -> TraceCauseResult:
    """Chains through the topic, longest first; or an empty answer naming its kind.

    Raises ScopeDenied / NotFound / InvalidArgument for scopes the token may not read or that do not exist.
    """
    scopes = await resolve_read_scopes(conn, caller, args.scope)
    scope_ids = [s.id for s in scopes if s.id is not None]
    # The last instant of the named second (minute, day): a write during it is visible as_of it.
    at = parse_span(args.as_of, "as_of").last if args.as_of is not None else datetime.now(tz=UTC)
    base: dict[str, Any] = {"scope_ids": scope_ids, "at": at}
    out = TraceCauseResult(
        topic=args.topic, resolution="none", message="", scopes=[s.name for s in scopes], as_of=args.as_of,
        direction=args.direction,
    )
    async with conn.cursor(row_factory=dict_row) as cur:
        out.matched, out.resolution = await _resolve_topic(cur, caller, base, args.topic, embedder)
        if not out.matched:
            return _empty(out, "no_entity_matched", scopes, args)
        topic_ids = list(dict.fromkeys(m.entity_id for m in out.matched))
        steps, contradicts, capped = await _load_subgraph(cur, caller, base, topic_ids, args.max_depth)
        walk = _Walk(steps, args.max_depth)
        found = walk.chains(topic_ids, upstream=args.direction != "effects", downstream=args.direction != "causes")
        if not found:
            await cur.execute(q.COUNT_STEP_HINTED, base)
            row = await cur.fetchone()
            hinted = int(row["count"]) if row else 0
    on_chains = set(topic_ids) | {s.cause for c in found for s in c} | {s.effect for c in found for s in c}
    out.contradictions = [c for ids, c in contradicts if ids & on_chains]
    out.cycles = walk.cycles
    out.chains_found = len(found)
    out.chains = [_chain_model(c) for c in found[: args.max_chains]]
    out.truncated = capped or walk.capped or len(found) > args.max_chains
    if not found:
        return _empty(out, "no_causes_recorded" if hinted == 0 else "no_chain_connects", scopes, args, hinted)
    out.message = _found_message(out, walk.depth_limited)
    return out


async def _resolve_topic(
    cur: psycopg.AsyncCursor[dict[str, Any]], caller: Caller, base: dict[str, Any], topic: str, embedder: MiniLM
) -> tuple[list[MatchedEntity], TopicResolution]:
    """Exact name/alias first (the whole topic, then its comma/and-separated parts), else dense."""
    parts = [topic] + [p for p in _SPLIT.split(topic) if p and p.casefold() != topic.casefold()]
    for candidates in ([topic], parts[1:]):
        matched: list[MatchedEntity] = []
        for name in candidates:
            await cur.execute(q.MATCH_ENTITIES, {**base, "name": name})
            matched += [
                MatchedEntity(entity_id=str(r["id"]), name=r["name"], scope=public_name(r["scope_name"]),
                              matched_by=r["matched_by"])
                for r in await cur.fetchall()
            ]
        if matched:
            return _unique(matched), "exact"
    if not base["scope_ids"]:
        return [], "none"
    with db_span("causal_dense_topic", org=caller.org):
        vector = await asyncio.to_thread(embedder.embed_one, topic)  # the process may host other services
        await cur.execute(q.DENSE_HITS, {**base, "embedding": vector, "limit": DENSE_HITS})
        rows = [r for r in await cur.fetchall() if float(r["score"]) >= DENSE_FLOOR]
    matched = []
    for r in rows:
        for role in ("source", "target"):
            matched.append(MatchedEntity(entity_id=str(r[f"{role}_entity"]), name=r[f"{role}_name"],
                                         scope=public_name(r["scope_name"]), matched_by="dense"))
    return _unique(matched), "dense" if matched else "none"


def _unique(matched: list[MatchedEntity]) -> list[MatchedEntity]:
    seen: dict[str, MatchedEntity] = {}
    for m in matched:
        seen.setdefault(m.entity_id, m)
    return list(seen.values())


async def _load_subgraph(
    cur: psycopg.AsyncCursor[dict[str, Any]], caller: Caller, base: dict[str, Any], topic_ids: list[str], depth: int
) -> tuple[dict[StepKey, _Step], list[tuple[set[str], Contradiction]], bool]:
    """Hinted facts within `depth` hops of the topic, as merged steps, plus `contradicts` facts."""
    steps: dict[StepKey, _Step] = {}
    contradicts: list[tuple[set[str], Contradiction]] = []
    seen_facts: set[str] = set()
    seen_nodes = set(topic_ids)
    frontier = set(topic_ids)
    capped = False
    # One level beyond max_depth, so the walk can tell a chain that ends from one that was cut short.
    for _ in range(depth + 1):
        remaining = MAX_EDGES - len(seen_facts)
        with db_span("causal_walk_level", org=caller.org):
            await cur.execute(q.HINTED_TOUCHING, {**base, "entity_ids": list(frontier), "limit": remaining + 1})
            rows = await cur.fetchall()
        if len(rows) > remaining:
            rows, capped = rows[:remaining], True
        reached: set[str] = set()
        for r in rows:
            fact_id = str(r["id"])
            if fact_id in seen_facts:
                continue
            seen_facts.add(fact_id)
            source, target = str(r["source_entity"]), str(r["target_entity"])
            if r["causal_hint"] == "contradicts":
                contradicts.append(({source, target}, Contradiction(
                    fact_id=fact_id, text=r["text"], source=r["source_name"], target=r["target_name"],
                    provenance=_provenance(r))))
                continue
            _add_step(steps, r)
            reached |= {source, target} - seen_nodes
        seen_nodes |= reached
        frontier = reached
        if not frontier or capped:
            break
    return steps, contradicts, capped


def _add_step(steps: dict[StepKey, _Step], r: dict[str, Any]) -> None:
    source_is_cause, polarity = _NORMALISE[r["causal_hint"]]
    ends = [(str(r["source_entity"]), r["source_name"]), (str(r["target_entity"]), r["target_name"])]
    (cause, cause_name), (effect, effect_name) = ends if source_is_cause else ends[::-1]
    step = steps.setdefault((cause, effect, polarity), _Step(cause, effect, polarity, cause_name, effect_name))
    hint: StepHint = r["causal_hint"]
    step.evidence.append(StepEvidence(fact_id=str(r["id"]), text=r["text"], hint=hint, relation=r["relation"],
                                      provenance=_provenance(r)))


class _Walk:
    """Path enumeration over merged steps, with loop cutting."""

    def __init__(self, steps: dict[StepKey, _Step], max_depth: int) -> None:
        self.max_depth = max_depth
        self.out: dict[str, list[_Step]] = {}
        self.inc: dict[str, list[_Step]] = {}
        for step in sorted(steps.values(), key=_step_order):
            self.out.setdefault(step.cause, []).append(step)
            self.inc.setdefault(step.effect, []).append(step)
        self.cycles: list[CutCycle] = []
        self._cycle_keys: set[frozenset[StepKey]] = set()
        self.capped = False
        self.depth_limited = False

    def chains(self, topic_ids: list[str], *, upstream: bool = True, downstream: bool = True) -> list[list[_Step]]:
        """Every maximal chain through any topic entity: deduplicated, sub-chains dropped, longest first.

        Without `upstream` no step before the topic is walked (chains start at it); without
        `downstream` none after it (chains end at it).
        """
        found: dict[tuple[StepKey, ...], list[_Step]] = {}
        for topic in topic_ids:
            ups = (self._paths(topic, forward=False) if upstream else []) or [[]]
            downs = (self._paths(topic, forward=True) if downstream else []) or [[]]
            for up in ups:
                causes = up[::-1]
                for down in downs:
                    if not causes and not down:
                        continue
                    if _nodes(causes) & _nodes(down) - {topic}:
                        candidates = [causes, down]  # a loop through the topic: keep each side alone
                    else:
                        candidates = [causes + down]
                    for chain in candidates:
                        if chain:
                            found.setdefault(tuple(s.key for s in chain), chain)
        inside: set[tuple[StepKey, ...]] = set()
        for keys in found:
            for i in range(len(keys)):
                for j in range(i + 1, len(keys) + 1):
                    if j - i < len(keys):
                        inside.add(keys[i:j])
        kept = [chain for keys, chain in found.items() if keys not in inside]
        return sorted(kept, key=lambda c: (-len(c), [_step_order(s) for s in c]))

    def _paths(self, start: str, *, forward: bool) -> list[list[_Step]]:
        """Maximal simple paths leaving `start` (forward: effects; backward: causes), in walk order."""
        results: list[list[_Step]] = []

        def visit(nodes: list[str], path: list[_Step]) -> None:
            if len(results) >= MAX_PATHS:
                self.capped = True
                return
            here = nodes[-1]
            extended = False
            for step in (self.out if forward else self.inc).get(here, []):
                nxt = step.effect if forward else step.cause
                if nxt in nodes:
                    self._cut(nodes[nodes.index(nxt):] + [nxt], path[nodes.index(nxt):] + [step], step, forward)
                    continue
                if len(path) >= self.max_depth:
                    self.depth_limited = True
                    continue
                extended = True
                visit(nodes + [nxt], path + [step])
            if not extended and path:
                results.append(path)

        visit([start], [])
        return results

    def _cut(self, loop_nodes: list[str], loop_steps: list[_Step], closing: _Step, forward: bool) -> None:
        key = frozenset(s.key for s in loop_steps)
        if key in self._cycle_keys:
            return
        self._cycle_keys.add(key)
        names = {s.cause: s.cause_name for s in loop_steps} | {s.effect: s.effect_name for s in loop_steps}
        ordered = loop_nodes if forward else loop_nodes[::-1]
        self.cycles.append(CutCycle(entities=[names[n] for n in ordered], cut_fact_id=closing.evidence[0].fact_id))


def _nodes(chain: list[_Step]) -> set[str]:
    return {s.cause for s in chain} | {s.effect for s in chain}


def _step_order(step: _Step) -> tuple[datetime, str]:
    first = step.evidence[0]
    return (first.provenance.valid_from or first.provenance.written_at, first.fact_id)


def _chain_model(chain: list[_Step]) -> Chain:
    steps = [s.to_model() for s in chain]
    return Chain(steps=steps, entities=[chain[0].cause_name] + [s.effect_name for s in chain], length=len(chain))


def _provenance(r: dict[str, Any]) -> Provenance:
    return Provenance(agent_id=r["agent_id"], tool=r["tool"], project=r["project"], session_id=r["session_id"],
                      written_at=r["written_at"], valid_from=r["t_valid"], valid_until=r["t_invalid"],
                      scope=public_name(r["scope_name"]))


def _where(scopes: list[Scope], args: TraceCauseInput) -> str:
    names = ", ".join(s.name for s in scopes)
    when = f" as of {parse_span(args.as_of, 'as_of').last.isoformat()}" if args.as_of is not None else ""
    return f"scope {names}{when}"


def _empty(
    out: TraceCauseResult, kind: EmptyKind, scopes: list[Scope], args: TraceCauseInput, hinted: int = 0
) -> TraceCauseResult:
    where = _where(scopes, args)
    names = ", ".join(f"'{m.name}'" for m in out.matched)
    how = "by exact name" if out.resolution == "exact" else "through the nearest facts"
    if kind == "no_entity_matched":
        message = (
            f"No entity in {where} is named '{args.topic}' (exact name or alias, case-insensitive), "
            f"and no stored fact is close enough to it (cosine >= {DENSE_FLOOR})."
        )
    elif kind == "no_causes_recorded":
        message = (
            f"The topic matched {names} {how}, but no fact in {where} carries a causal hint: the store may "
            "predate causal hints, or the agents that wrote it did not set them."
        )
    else:
        message = (
            f"The topic matched {names} {how}; {hinted} fact(s) in {where} carry causal hints, "
            "but no chain of them connects to these entities"
            + ("." if args.direction == "both" else
               f" in direction '{args.direction}' (direction 'both' follows causes and effects).")
        )
        if out.contradictions:
            message += f" {len(out.contradictions)} contradicting fact(s) touch them and are listed."
    out.empty_kind = kind
    out.message = message
    return out


def _found_message(out: TraceCauseResult, depth_limited: bool) -> str:
    names = ", ".join(f"'{m.name}'" for m in out.matched)
    how = "by exact name" if out.resolution == "exact" else "through the nearest facts (no exact name matched)"
    through = {"both": "through", "causes": "leading to", "effects": "leading from"}[out.direction]
    parts = [f"{out.chains_found} chain(s) {through} {names} (matched {how}); the longest has {out.chains[0].length} step(s)."]
    if out.truncated:
        parts.append(f"Only {len(out.chains)} are returned; more exist (raise max_chains or narrow the topic).")
    if depth_limited:
        parts.append("Some chains continue beyond max_depth.")
    if out.cycles:
        parts.append(f"{len(out.cycles)} loop(s) were cut and are listed in cycles.")
    if out.contradictions:
        parts.append(f"{len(out.contradictions)} contradicting fact(s) are listed beside the chains.")
    return " ".join(parts)
