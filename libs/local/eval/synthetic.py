"""Synthetic, deterministic engineering-memory facts for the benchmark and the size sweep.

Facts look like what coding agents store ("Cobalt gateway depends on Ledger queue to settle
card payments."): entity names from a fixed vocabulary, one of a dozen relations, and a detail
phrase, so texts are distinct without being paraphrases of each other. The same seed always
gives the same facts, batches and queries, so two runs compare like with like.

Batches are shaped for `write_episode`: at most 50 facts over at most 15 entities, every
(source, target, relation) edge used once across the whole store, so no write supersedes
another and the store holds exactly as many active facts as were generated.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

PREFIXES = (
    "Atlas Beacon Cobalt Delta Ember Falcon Garnet Harbor Indigo Juniper Kestrel Lumen Meridian Nimbus Onyx "
    "Pioneer Quartz Raven Sierra Tundra Umber Vertex Willow Xenon Yarrow Zephyr Aurora Basalt Cinder Dune Echo "
    "Fjord Glacier Helix Iris Jasper Krypton Lotus Magnet Nova Orbit Prism Quill Ridge Solstice Talon Ultra "
    "Vesper Wren Axiom Bramble Cedar Drift Flint Grove Haven Ivory Jade Kelp Larch Moss Nectar Opal Pine "
    "Quarry Rune Sable Thistle Umbra Vale Wisp Yonder Zinc Amber Birch Coral Dusk Acorn Badger Canyon Dahlia "
    "Egret Fennel Gecko Heron Ibis Jackal Koala Lynx Marten Newt Osprey Puffin Quokka Robin Salmon Tapir "
    "Urchin Viper Walrus Yak Zebra Anvil Bolt Crane Dynamo Engine Forge Gear Hammer Ingot Joule Kiln Lathe "
    "Mortar Nozzle Oxide Piston Radar Sonar Turbine Valve Winch Alder Banyan Cypress Elm Hazel Maple Oak "
    "Rowan Spruce Teak Aspen Comet Galaxy Meteor Nebula Pulsar Quasar Saturn Titan Vega Orion Lyra Draco"
).split()
KINDS = (
    "service", "queue", "gateway", "worker", "dashboard", "cache", "pipeline", "cluster", "database",
    "scheduler", "api", "bucket", "library", "team", "runbook",
)
RELATIONS: tuple[tuple[str, str, str], ...] = (
    # relation, fact template, question template ({s} source, {o} target, {d} detail)
    ("uses", "{s} uses {o} for {d}.", "what does {s} use for {d}?"),
    ("depends on", "{s} depends on {o} to {d}.", "which component does {s} need to {d}?"),
    ("owned by", "{s} is owned by {o}, who handle {d}.", "who is responsible for {s}?"),
    ("deployed to", "{s} is deployed to {o} in the {d} region.", "where does {s} run in {d}?"),
    ("replaced", "{s} replaced {o} because of {d}.", "why was {o} replaced?"),
    ("calls", "{s} calls {o} every few minutes to {d}.", "what does {s} call to {d}?"),
    ("writes to", "{s} writes {d} records to {o}.", "where are the {d} records of {s} stored?"),
    ("monitored by", "{s} is monitored by {o} with an alert on {d}.", "how is {s} monitored?"),
    ("blocked by", "{s} is blocked by {o} until {d} is fixed.", "what is blocking {s}?"),
    ("reads from", "{s} reads {d} from {o} at start-up.", "where does {s} load {d} from?"),
    ("migrated to", "{s} migrated to {o} after {d}.", "what did {s} move to?"),
    ("tested with", "{s} is tested against {o} using {d}.", "how is {s} tested?"),
)
_QUALIFIERS = (
    "nightly", "EU", "legacy", "batched", "real-time", "regional", "partner", "mobile", "internal", "archived",
    "encrypted", "sandbox", "premium", "hourly", "retail", "wholesale", "B2B", "checkout", "marketing", "payroll",
    "warehouse", "clinic", "tenant", "guest", "loyalty", "subscription", "refund", "kiosk", "offline", "beta",
)
_TOPICS = (
    "card payment settlement", "invoice exports", "session token refresh", "thumbnail resizing",
    "search index rebuilds", "fraud score lookups", "email delivery retries", "feature flag evaluation",
    "audit trail archiving", "rate limit counters", "address validation", "GDPR data export",
    "latency spikes", "disk usage alerts", "TLS certificate rotation", "schema migrations",
    "order fulfilment events", "webhook signature checks", "currency conversion", "password reset links",
    "PDF report rendering", "inventory reservation", "shipping label printing", "integration tests",
    "memory leak triage", "OAuth consent flow", "tax reports", "push notification fan-out", "CSV imports",
    "geo-IP enrichment", "A/B test assignment", "cold-start latency", "consent banner state", "SMS gateways",
    "barcode scanning", "coupon redemption", "chargeback disputes", "KYC document checks", "price indexing",
    "recommendation scoring", "clickstream sampling", "backup verification", "DNS failover", "quota billing",
)
# 30 × 44 detail phrases: a vocabulary wide enough that no detail word sits in a large share of
# the store (real memories have long-tailed vocabularies; a narrow one would make every lexical
# lookup touch most rows).
DETAILS = tuple(f"{q} {t}" for t in _TOPICS for q in _QUALIFIERS)
MAX_ENTITIES_PER_BATCH = 15
SUBJECTS_PER_BATCH = 5
OBJECTS_PER_BATCH = 10


@dataclass(frozen=True)
class Fact:
    source: str
    target: str
    relation: str
    text: str
    question: str


def entity_names() -> list[str]:
    """Every entity name the generator uses (prefix × kind; 2,190 names)."""
    return [f"{p} {k}" for p in PREFIXES for k in KINDS]


class FactSource:
    """An endless, deterministic stream of write_episode-sized batches of distinct edges."""

    def __init__(self, seed: int = 7) -> None:
        self._rng = random.Random(seed)
        self._names = entity_names()
        self._seen: set[tuple[str, str, str]] = set()
        self.known: set[str] = set()  # entity names already stored (exact match resolves them)

    def batch(self, size: int = 50) -> list[Fact]:
        """Up to `size` (≤ 50) facts over at most 15 entities; every edge new to the store."""
        subjects = self._rng.sample(self._names, SUBJECTS_PER_BATCH)
        objects = self._rng.sample([n for n in self._names if n not in subjects], OBJECTS_PER_BATCH)
        pairs = [(s, o) for s in subjects for o in objects]
        self._rng.shuffle(pairs)
        facts: list[Fact] = []
        for source, target in pairs[:size]:
            for _ in range(len(RELATIONS)):
                relation, fact_t, question_t = self._rng.choice(RELATIONS)
                if (source, target, relation) not in self._seen:
                    break
            else:
                continue  # every relation of this pair is taken; the batch is one fact shorter
            self._seen.add((source, target, relation))
            detail = self._rng.choice(DETAILS)
            facts.append(Fact(source, target, relation, fact_t.format(s=source, o=target, d=detail),
                              question_t.format(s=source, o=target, d=detail)))
        return facts

    def batches(self, total: int, size: int = 50) -> Iterator[list[Fact]]:
        """Batches until exactly `total` facts were produced."""
        left = total
        while left > 0:
            facts = self.batch(min(size, left))
            left -= len(facts)
            yield facts

    def write_args(self, facts: list[Fact], scope: str, session: str = "benchmark") -> dict[str, object]:
        """A write_episode call for the batch; names seen for the first time are declared new.

        Declaring first-time names `new` is what an agent does after a deferral; it keeps the
        synthetic names (which resemble each other on purpose) from being deferred as near
        matches, so every generated fact is stored.
        """
        names = list(dict.fromkeys(n for f in facts for n in (f.source, f.target)))
        fresh = [n for n in names if n not in self.known]
        self.known.update(names)
        return {
            "scope": scope, "session_id": session, "project": "benchmark",
            "entities": [{"name": n, "type": n.rsplit(" ", 1)[-1]} for n in names],
            "entity_resolutions": [{"mention": n, "entity_id": "new", "rationale": "synthetic benchmark entity"}
                                   for n in fresh],
            "facts": [{"source": f.source, "target": f.target, "relation": f.relation, "fact": f.text,
                       "confidence": "extracted"} for f in facts],
        }


def questions(count: int, seed: int = 11) -> list[str]:
    """`count` benchmark questions about the generator's vocabulary (fixed by the seed)."""
    source = FactSource(seed)
    out: list[str] = []
    while len(out) < count:
        out.extend(f.question for f in source.batch(10))
    return out[:count]
