"""Topic placement: the indexed look-alike check decides exactly what comparing every pair of
names decides (the definition, written out below), on a history full of look-alikes."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np

from echo_memory.libs.core.config.consolidation import ConsolidationSettings
from echo_memory.services.consolidation.topics import (
    RECENT_TOPICS_PER_KEY,
    Placeable,
    Topic,
    look_alike,
    name_words,
    place,
)

NAMES = ["Billing API v1", "Billing API v2", "Billing API", "Billing", "Mercury", "Mercury Jones",
         "Mercury (company)", "Ledger service", "Ledger service (EU)", "Ledger", "Atlas", "Atlas 2.0",
         "Nova queue", "Orion cluster", "Orion", "v3", "(draft)"]


def _history(count: int, seed: int) -> list[Placeable]:
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    centres = np_rng.normal(size=(4, 16))
    facts = []
    for i in range(count):
        a, b = rng.sample(range(len(NAMES)), 2)
        vector = centres[rng.randrange(4)] + np_rng.normal(scale=0.4, size=16)
        keys = (f"e{a}", f"e{b}", f"session:{i // 6}")
        facts.append(Placeable(f"f{i:04d}", keys, vector / np.linalg.norm(vector),
                               ((f"e{a}", name_words(NAMES[a])), (f"e{b}", name_words(NAMES[b])))))
    return facts


def _place_by_every_pair(facts: list[Placeable], policy: ConsolidationSettings) -> tuple[list[list[int]], int]:
    """The definition: a fact may join a topic unless some entity the topic holds, other than the
    fact's own, looks like one of the fact's entities. Also returns how often that refused a topic."""
    members: list[list[int]] = []
    totals: list[np.ndarray] = []
    held: list[dict[str, tuple[str, ...]]] = []
    opened_by: dict[str, list[int]] = defaultdict(list)
    refused = 0
    for index, fact in enumerate(facts):
        own = dict(fact.entities)
        best, best_cos = -1, policy.topic_threshold
        for t in sorted({t for key in fact.keys for t in opened_by[key][-RECENT_TOPICS_PER_KEY:]}):
            if len(members[t]) >= policy.topic_cap:
                continue
            if any(look_alike(words, other) for _, words in fact.entities
                   for entity, other in held[t].items() if entity not in own):
                refused += 1
                continue
            cos = float(totals[t] / np.linalg.norm(totals[t]) @ fact.vector)
            if cos >= best_cos and (best < 0 or cos > best_cos):
                best, best_cos = t, cos
        if best < 0:
            members.append([])
            totals.append(np.zeros(16))
            held.append({})
            best = len(members) - 1
        members[best].append(index)
        totals[best] = totals[best] + fact.vector
        held[best].update(fact.entities)
        for key in fact.keys:
            if not opened_by[key] or opened_by[key][-1] != best:
                opened_by[key].append(best)
    return members, refused


def test_placement_matches_comparing_every_pair_of_names() -> None:
    policy = ConsolidationSettings()
    for seed in range(3):
        facts = _history(900, seed)
        expected, refused = _place_by_every_pair(facts, policy)
        assert refused > 100  # the look-alike check decided many placements
        assert place(facts, policy.topic_threshold, policy.topic_cap) == expected


def test_a_topic_refuses_look_alikes_both_ways_but_never_the_facts_own_entities() -> None:
    vector = np.ones(4) / 2

    def fact(*names: str) -> Placeable:
        return Placeable("f", tuple(names), vector, tuple((n, name_words(n)) for n in names))

    topic = Topic()
    topic.add(0, fact("Billing API v1", "Mercury Jones"))
    assert not topic.admits(fact("Billing API v2"))  # the same name but for the version
    assert not topic.admits(fact("Mercury"))  # a held name starts with it
    assert not topic.admits(fact("Billing API v1 (EU)", "Atlas"))  # it is a qualified held name
    assert not topic.admits(fact("Mercury Jones Ltd"))  # it starts with a held name
    assert topic.admits(fact("Billing API v1", "Atlas"))  # the held entity itself
    assert topic.admits(fact("Jones"))  # a name's tail is not a look-alike
    assert topic.admits(fact("v2"))  # a name of no words looks like nothing
