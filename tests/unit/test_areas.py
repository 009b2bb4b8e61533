"""Areas, the second level of digests: topics grouped by closeness **and** a shared entity or
session, never with a look-alike, capped, and the same whatever order the facts arrive in. Vectors
are set by hand so that each fact starts a topic of its own (cosine below `topic_threshold`) while
topics can still meet in an area (cosine at least `area_threshold`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from echo_memory.libs.core.config.consolidation import ConsolidationSettings
from echo_memory.services.consolidation.digests import DigestDraft, Entity, MemberFact, area_drafts, topic_drafts
from echo_memory.services.consolidation.topics import area_id, topic_id

POLICY = ConsolidationSettings()
START = datetime(2026, 3, 1, tzinfo=UTC)
NAMES = {"e1": "Billing API", "e2": "Stripe", "e3": "Ledger", "e4": "Atlas", "e5": "Nova queue",
         "e6": "Orion", "e7": "Billing API v2", "e8": "Kafka", "e9": "Redis"}


def _vector(*parts: float) -> np.ndarray:
    vector = np.zeros(8, dtype=np.float32)
    vector[: len(parts)] = parts
    return vector / np.linalg.norm(vector)


# Cosine 0.42 to the first axis: too far to share a topic with a fact on it, near enough for an area.
NEAR = _vector(0.42, 0.9075)
NEAR_OTHER = _vector(0.42, 0, 0.9075)


def _fact(n: int, source: str, target: str, vector: np.ndarray, session: str) -> MemberFact:
    return MemberFact(f"00000000-0000-0000-0000-{n:012d}", source, target, "relates to",
                      f"{NAMES[source]} relates to {NAMES[target]} ({n}).", START + timedelta(days=n), "billing",
                      session, None, vector)


def _names() -> dict[str, Entity]:
    return {e: Entity(e, name, "service") for e, name in NAMES.items()}


def _areas(facts: list[MemberFact], policy: ConsolidationSettings = POLICY
           ) -> tuple[list[DigestDraft], list[DigestDraft]]:
    topics = topic_drafts(facts, _names(), policy)
    return topics, area_drafts(topics, {f.id: f for f in facts}, _names(), policy)


def test_topics_that_share_an_entity_and_lie_close_form_an_area() -> None:
    facts = [
        _fact(1, "e1", "e2", _vector(1), "s1"),
        _fact(2, "e1", "e3", NEAR, "s2"),  # shares Billing API with fact 1
        _fact(3, "e7", "e3", NEAR_OTHER, "s3"),  # Billing API v2: a look-alike of Billing API
        _fact(4, "e4", "e5", _vector(1), "s4"),  # as close as can be, but shares nothing
        _fact(5, "e2", "e6", _vector(0, 0, 0, 1), "s1"),  # shares Stripe and a session, but far
    ]
    topics, areas = _areas(facts)
    assert len(topics) == 5  # every fact a topic of its own
    assert len(areas) == 1
    area = areas[0]
    first, second = topic_id(facts[0].id), topic_id(facts[1].id)
    assert area.kind == "area" and area.subject_id == area_id(first)
    assert area.parts == tuple(sorted((first, second)))
    assert area.member_ids == sorted([facts[0].id, facts[1].id])
    assert area.summary.startswith("Area of 2 topics: Billing API, ")
    assert "Billing API v2" not in area.summary and "Atlas" not in area.summary and "Orion" not in area.summary
    # Its vector is the mean of its members' stored vectors, not of anything re-embedded.
    mean = (facts[0].embedding + facts[1].embedding) / 2
    assert np.allclose(area.embedding, mean / np.linalg.norm(mean), atol=1e-6)


def test_a_session_alone_joins_topics_and_a_lone_topic_makes_no_area() -> None:
    facts = [_fact(1, "e1", "e2", _vector(1), "s1"), _fact(2, "e8", "e9", NEAR, "s1")]
    assert [a.parts for a in _areas(facts)[1]] == [tuple(sorted(topic_id(f.id) for f in facts))]
    facts = [_fact(1, "e1", "e2", _vector(1), "s1"), _fact(2, "e8", "e9", NEAR, "s2")]
    assert _areas(facts)[1] == []


def test_an_area_is_capped_and_the_same_in_any_order() -> None:
    facts = [_fact(n, "e1", f"e{n + 1}", vector, f"s{n}")
             for n, vector in ((1, _vector(1)), (2, NEAR), (3, NEAR_OTHER), (4, _vector(0.48, 0, 0, 0.877)))]
    topics, areas = _areas(facts)
    assert len(topics) == 4 and [len(a.parts) for a in areas] == [4]
    capped = _areas(facts, POLICY.model_copy(update={"area_cap": 3}))[1]
    assert [len(a.parts) for a in capped] == [3]  # the fourth topic is left on its own
    assert [_key(a) for a in _areas(list(reversed(facts)))[1]] == [_key(a) for a in areas]


def _key(draft: DigestDraft) -> tuple[object, ...]:
    return draft.subject_id, draft.parts, draft.member_ids, draft.summary, draft.embedding.tobytes()
