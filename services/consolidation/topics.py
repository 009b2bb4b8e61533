"""Topic digests: small clusters of facts about one thing, found without a model.

Facts are placed one by one in a stable order (written_at, id). A fact joins the open topic whose
centre is nearest, but only a topic it shares an entity or a session with, and only when the cosine
to that centre is at least `topic_threshold`: two look-alike names that share nothing never meet on
similarity alone. A topic that reaches `topic_cap` facts is closed; the next fact starts another.
A fact never joins a topic that holds a look-alike of one of its entities (`look_alike`: the
same name but for a version or a qualifier, or one name the start of the other), so "Billing API
v1" and "Billing API v2", or "Mercury" and "Mercury Jones", never share a topic even when their
facts share a third entity. The same facts in the same order always give the same topics.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from echo_memory.libs.server.embed import count_tokens

# A topic's id is derived from its first fact, so a rebuild names it the same.
TOPIC_NAMESPACE = uuid.UUID("7d0c6f52-3b0e-4f5c-9a55-0c1f1a8e7b21")
# An area's id is derived from the topic that opened it, likewise.
AREA_NAMESPACE = uuid.UUID("2f4b9a1e-8c3d-4e6f-b7a2-5d9e0c1b3a47")
# How many of the topics a key (entity or session) opened are compared with a new fact: the most
# recent ones, so a hub entity with thousands of topics costs the same as any other.
RECENT_TOPICS_PER_KEY = 32
DUPLICATE_SENTENCE = 0.9  # a quoted sentence this close to one already quoted adds nothing


_QUALIFIER = re.compile(r"\([^)]*\)|\bv?\d+(\.\d+)*\b|[^\w\s]")


def name_words(name: str) -> tuple[str, ...]:
    """A name's words without versions, numbers, punctuation or a parenthesised qualifier."""
    return tuple(_QUALIFIER.sub(" ", name.lower()).split())


def look_alike(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Two different entities' names that a reader could take for one: equal once versions and
    qualifiers are gone, or one the start of the other."""
    if not a or not b:
        return False
    shorter, longer = (a, b) if len(a) <= len(b) else (b, a)
    return longer[: len(shorter)] == shorter


@dataclass
class Topic:
    """An open topic: its members, the sum of their vectors, and its entities' names indexed so that
    `admits` costs a few lookups per entity of the fact, however many entities the topic holds.

    By name words (`name_words`): `_starts` maps every leading run of a held name's words (the
    whole name included) to the entities whose name starts so, and `_whole` each whole name to its
    entities. A name w is a look-alike of a held name o when o starts with w (`_starts[w]`) or w
    starts with o (`_whole[w[:k]]` for some k).
    """

    members: list[int] = field(default_factory=list)  # indexes into the placed facts
    total: np.ndarray | None = None
    _centre: np.ndarray | None = None
    _held: set[str] = field(default_factory=set)
    _starts: dict[tuple[str, ...], set[str]] = field(default_factory=lambda: defaultdict(set))
    _whole: dict[tuple[str, ...], set[str]] = field(default_factory=lambda: defaultdict(set))

    def admits(self, fact: Placeable) -> bool:
        """False when the topic holds a look-alike of one of the fact's entities (an entity of the
        fact itself never counts against it)."""
        own = {entity for entity, _ in fact.entities}
        for _, words in fact.entities:
            if not words:
                continue
            rivals = [self._starts.get(words, ())] + [self._whole.get(words[:k], ()) for k in range(1, len(words) + 1)]
            if any(held not in own for group in rivals for held in group):
                return False
        return True

    def add(self, index: int, fact: Placeable) -> None:
        self.members.append(index)
        self.total = fact.vector.astype(np.float64) if self.total is None else self.total + fact.vector
        self._centre = None
        for entity, words in fact.entities:
            if entity in self._held or not words:
                continue
            self._held.add(entity)
            self._whole[words].add(entity)
            for k in range(1, len(words) + 1):
                self._starts[words[:k]].add(entity)

    def centre(self) -> np.ndarray:
        assert self.total is not None
        if self._centre is None:
            norm = float(np.linalg.norm(self.total))
            self._centre = self.total / norm if norm > 0 else self.total
        return self._centre


@dataclass(frozen=True)
class Placeable:
    id: str
    keys: tuple[str, ...]  # entity ids and "session:<id>"
    vector: np.ndarray  # unit length
    entities: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (entity id, name_words) of its entities


def place(facts: list[Placeable], threshold: float, cap: int) -> list[list[int]]:
    """Indexes of `facts` grouped into topics, in the order the topics were opened: each joins the
    nearest open topic it shares a key with, at a cosine of at least `threshold`, that holds fewer
    than `cap` and no look-alike of its entities. Areas group topics the same way."""
    topics: list[Topic] = []
    opened_by: dict[str, list[int]] = defaultdict(list)
    for index, fact in enumerate(facts):
        near = []
        for t in {t for key in fact.keys for t in opened_by[key][-RECENT_TOPICS_PER_KEY:]}:
            if len(topics[t].members) < cap:
                cos = float(topics[t].centre() @ fact.vector)
                if cos >= threshold:
                    near.append((-cos, t))
        # Nearest first (ties: the earliest opened); the look-alike check, the costly part, runs
        # only until one admits the fact.
        best = next((t for _, t in sorted(near) if topics[t].admits(fact)), -1)
        if best < 0:
            topics.append(Topic())
            best = len(topics) - 1
        topics[best].add(index, fact)
        for key in fact.keys:
            if not opened_by[key] or opened_by[key][-1] != best:
                opened_by[key].append(best)
    return [t.members for t in topics]


def topic_id(first_fact_id: str) -> str:
    return str(uuid.uuid5(TOPIC_NAMESPACE, first_fact_id))


def area_id(first_topic_id: str) -> str:
    return str(uuid.uuid5(AREA_NAMESPACE, first_topic_id))


def summary(texts: list[str], vectors: np.ndarray, entity_names: list[str], first_day: str, last_day: str,
            relations: list[str], sentences: int, heading: str) -> str:
    """`heading` ("Topic", "Area"), the entities most named, the size and time span, then the
    `sentences` most central member sentences (skipping near-duplicates) and what the rest are about."""
    centre = vectors.mean(axis=0)
    norm = float(np.linalg.norm(centre))
    centre = centre / norm if norm > 0 else centre
    order = sorted(range(len(texts)), key=lambda i: (-float(vectors[i] @ centre), texts[i]))
    chosen: list[int] = []
    for i in order:
        if all(float(vectors[i] @ vectors[j]) < DUPLICATE_SENTENCE for j in chosen):
            chosen.append(i)
        if len(chosen) == sentences:
            break
    about = ", ".join(name for name, _ in Counter(entity_names).most_common(4))
    span = first_day if first_day == last_day else f"{first_day} to {last_day}"
    lines = [f"{heading}: {about} ({len(texts)} facts, {span})."]
    lines += [f"- {texts[i]}" for i in chosen]
    if len(texts) > len(chosen):
        top = ", ".join(r for r, _ in Counter(relations).most_common(3))
        lines.append(f"- and {len(texts) - len(chosen)} more ({top})")
    return "\n".join(lines)


__all__ = ["Placeable", "area_id", "count_tokens", "look_alike", "name_words", "place", "summary", "topic_id"]
