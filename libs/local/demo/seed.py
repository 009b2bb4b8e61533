"""A whole invented software org as an Echo Memory export file: `echo-memory demo-seed` restores it.

Every name is made up. The org has divisions of teams that own services; people sit on teams and
rotate on call; services depend on each other and on shared infrastructure; incidents are caused
by deploys and lead to decisions (causal hints); versions get upgraded (superseded facts, so the
as_of slider has history); several agents write from several projects over about four months;
agents read the memory and save some of what they read (the recall-cost panel and `why` trails).
Small side projects with no link to the rest become separate islands of the graph.

The output is a list of export lines (header, records, end line) that `echo_memory.libs.local.backup.import_lines`
sends to the audit service, the same path as `echo-memory import`; nothing writes around it.
"""

from __future__ import annotations

import base64
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from echo_memory.libs.core.contracts.audit import EXPORT_FORMAT, EXPORT_VERSION, SECTIONS
from echo_memory.libs.core.contracts.demo import demo_agent
from echo_memory.libs.server.embed.minilm import MODEL_NAME, count_tokens

Embed = Callable[[list[str]], np.ndarray]

TEAMS = ["Payments", "Identity", "Platform", "Data", "Mobile", "Search", "Growth", "SRE"]
SERVICES = {
    "Payments": ["ledger-api", "checkout-web", "refund-worker"],
    "Identity": ["auth-gateway", "token-minter", "profile-svc"],
    "Platform": ["deploy-bot", "config-store", "edge-proxy"],
    "Data": ["event-ingest", "feature-store", "nightly-etl"],
    "Mobile": ["ios-app", "android-app", "push-relay"],
    "Search": ["search-indexer", "query-api", "ranker"],
    "Growth": ["experiments-svc", "email-sender", "referral-api"],
    "SRE": ["status-page", "pager-router", "log-shipper"],
}
INFRA = ["postgres-main", "kafka-bus", "redis-cache", "object-store", "k8s-prod", "k8s-staging"]
LIBRARIES = [("grpc-core", ["1.58", "1.62", "1.66"]), ("react", ["17", "18", "19"]),
             ("openssl", ["3.0", "3.2", "3.3"]), ("pg-driver", ["2.9", "3.1", "3.2"])]
FIRST = ["Priya", "Marco", "Aiko", "Tomas", "Lena", "Omar", "Sofia", "Ravi", "Jonas", "Mei", "Elif", "Kwame",
         "Ines", "Pavel", "Noor", "Diego", "Hana", "Felix", "Zara", "Luca", "Amara", "Sven", "Yusuf", "Ada"]
LAST = ["Raman", "Okafor", "Lindqvist", "Tanaka", "Moreau", "Haddad", "Novak", "Silva", "Berg", "Castillo",
        "Kowalski", "Mensah", "Duarte", "Ivanova", "Sato", "Fischer", "Rossi", "Adeyemi", "Larsen", "Kaur"]
REGIONS = ["eu", "us", "apac", "latam", "africa", "nordics", "gulf", "canada"]
# Agent ids carry the demo- prefix so no figure or filter mistakes them for the user's own agents.
CLAUDE, CURSOR, CODEX, OPS = demo_agent("claude-code"), demo_agent("cursor"), demo_agent("codex"), demo_agent("ops-bot")
AGENTS = {CLAUDE: "claude-code", CURSOR: "cursor", CODEX: "codex-cli", demo_agent("gemini-cli"): "gemini-cli",
          OPS: "ops-bot"}
PROJECTS = ["platform-monorepo", "infra-live", "mobile-app", "data-pipelines", "incident-review"]
SIDE_PROJECTS = [
    ("hackathon-haiku-bot", "haiku-corpus", "trained_on", "The hackathon haiku bot is trained on the haiku corpus."),
    ("office-plant-tracker", "sensor-hub", "reads_from", "The office plant tracker reads soil moisture from the sensor hub."),
    ("lunch-roulette", "team-calendar", "reads_from", "Lunch roulette picks pairs from the team calendar."),
    ("offsite-2026", "venue-shortlist", "decided_by", "The 2026 offsite location is chosen from the venue shortlist."),
]
QUESTIONS = ["who is on call for {svc}", "what does {svc} depend on", "why did {svc} fail last week",
             "which team owns {svc}", "what version of grpc does {svc} use", "what caused the last incident on {svc}"]
DAY = timedelta(days=1)


@dataclass
class _Fact:
    id: str
    source: str
    target: str
    relation: str
    text: str
    t_valid: datetime
    agent: str
    project: str
    session: str
    causal_hint: str | None = None
    confidence: str = "extracted"
    supersedes: str | None = None
    t_invalid: datetime | None = None


@dataclass
class _World:
    rng: random.Random
    now: datetime
    ids: random.Random = field(default_factory=random.Random)
    entities: dict[str, tuple[str, str, datetime]] = field(default_factory=dict)  # key -> (id, type, first seen)
    names: dict[str, str] = field(default_factory=dict)  # key -> display name
    facts: list[_Fact] = field(default_factory=list)
    active: dict[tuple[str, str, str], _Fact] = field(default_factory=dict)

    def uid(self) -> str:
        return str(uuid.UUID(int=self.ids.getrandbits(128), version=4))

    def entity(self, name: str, kind: str, when: datetime) -> str:
        key = name.lower()
        if key not in self.entities:
            self.entities[key] = (self.uid(), kind, when)
            self.names[key] = name
        elif when < self.entities[key][2]:
            eid, k, _ = self.entities[key]
            self.entities[key] = (eid, k, when)
        return key

    def when(self, lo_days: float, hi_days: float) -> datetime:
        return self.now - timedelta(days=self.rng.uniform(lo_days, hi_days), seconds=self.rng.randint(0, 3600))

    def fact(self, source: tuple[str, str], target: tuple[str, str], relation: str, text: str, when: datetime,
             agent: str | None = None, project: str | None = None, hint: str | None = None) -> _Fact:
        s = self.entity(source[0], source[1], when)
        t = self.entity(target[0], target[1], when)
        agent = agent or self.rng.choice(list(AGENTS))
        f = _Fact(id=self.uid(), source=s, target=t, relation=relation, text=text, t_valid=when, agent=agent,
                  project=project or self.rng.choice(PROJECTS), session=f"sess-{self.rng.getrandbits(40):010x}",
                  causal_hint=hint, confidence=self.rng.choice(["extracted"] * 4 + ["inferred"]))
        key = (s, t, relation)
        old = self.active.get(key)
        if old is not None:  # a changed claim on the same edge: end the old version, link the new one
            if when <= old.t_valid:
                f.t_valid = when = old.t_valid + timedelta(minutes=self.rng.randint(5, 600))
            old.t_invalid = when
            f.supersedes = old.id
        self.active[key] = f
        self.facts.append(f)
        return f


def _division(w: _World, d: int) -> None:
    rng = w.rng
    suffix = "" if d == 0 else f"-{REGIONS[d % len(REGIONS)]}{d // len(REGIONS) or ''}"
    people: dict[str, list[str]] = {}
    for team in TEAMS:
        members = []
        for _ in range(3):
            members.append(f"{rng.choice(FIRST)} {rng.choice(LAST)}{suffix and ' (' + suffix[1:] + ')'}")
        people[team] = sorted(set(members))
    infra = [f"{i}{suffix}" for i in INFRA]
    services = {team: [f"{s}{suffix}" for s in SERVICES[team]] for team in TEAMS}
    every = [s for ss in services.values() for s in ss]
    for team in TEAMS:
        tname = f"{team} team{suffix and ' ' + suffix[1:]}"
        for p in people[team]:
            w.fact((p, "person"), (tname, "team"), "member_of", f"{p} is on the {tname}.", w.when(100, 130))
        for svc in services[team]:
            w.fact((tname, "team"), (svc, "service"), "owns", f"The {tname} owns {svc}.", w.when(90, 130),
                   project="platform-monorepo")
            store = rng.choice(infra[:4])
            w.fact((svc, "service"), (store, "infrastructure"), "stores_data_in", f"{svc} stores its data in {store}.",
                   w.when(60, 120), project="infra-live")
            cluster = rng.choice(infra[4:])
            w.fact((svc, "service"), (cluster, "infrastructure"), "deployed_to", f"{svc} is deployed to {cluster}.",
                   w.when(60, 120), project="infra-live")
            for dep in rng.sample([s for s in every if s != svc], 2):
                w.fact((svc, "service"), (dep, "service"), "depends_on", f"{svc} calls {dep} on its request path.",
                       w.when(30, 110), project="platform-monorepo")
            lib, versions = rng.choice(LIBRARIES)
            start = rng.uniform(60, 110)
            for i, v in enumerate(versions):  # upgrades: each version supersedes the last
                w.fact((svc, "service"), (lib, "library"), "uses_version", f"{svc} uses {lib} {v}.",
                       w.now - timedelta(days=start - i * rng.uniform(15, 25)), agent=CODEX,
                       project="platform-monorepo")
            on_call = people[team]
            for week in range(0, 16, 4):  # the on-call rotation changes every four weeks
                p = on_call[(week // 4) % len(on_call)]
                w.fact((svc, "service"), (tname, "team"), "on_call_rotation", f"{p} is the primary on call for {svc}.",
                       w.now - timedelta(days=112 - week * 7, hours=rng.randint(0, 8)), agent=OPS,
                       project="incident-review")
        w.fact((tname, "team"), (people[team][0], "person"), "led_by", f"The {tname} is led by {people[team][0]}.",
               w.when(100, 130))
    for n in range(6):  # incidents: a deploy caused them, a person mitigated them, a decision followed
        svc = rng.choice(every)
        inc = f"INC-{2000 + d * 10 + n}"
        t = w.when(5, 95)
        deploy = f"deploy {svc} r{rng.randint(100, 999)}"
        w.fact((inc, "incident"), (svc, "service"), "affected", f"{inc} took {svc} down for {rng.randint(4, 90)} minutes.",
               t, agent=OPS, project="incident-review")
        w.fact((inc, "incident"), (deploy, "change"), "caused_by", f"{inc} was caused by the {deploy} rollout.",
               t + timedelta(hours=2), agent=OPS, project="incident-review", hint="caused_by")
        team = next(tm for tm, ss in services.items() if svc in ss)
        w.fact((rng.choice(people[team]), "person"), (inc, "incident"), "mitigated", f"{inc} was mitigated by a rollback.",
               t + timedelta(hours=3), project="incident-review")
        adr = f"ADR-{100 + d * 10 + n}: canary {svc} deploys"
        w.fact((inc, "incident"), (adr, "decision"), "led_to", f"{inc} led to {adr}.", t + timedelta(days=2),
               project="incident-review", hint="led_to")
        w.fact((adr, "decision"), (svc, "service"), "applies_to", f"{adr} applies to every {svc} release.",
               t + timedelta(days=2, hours=1), agent=CLAUDE)


def build_world(facts: int, *, now: datetime, seed: int = 0, ids: str = "") -> _World:
    """The invented org with at least `facts` fact versions (whole divisions are added until then).

    Ids come from their own generator seeded with `seed` and `ids`, so the same org seeded into
    two scopes gets different ids (an import into a store that holds some of them would remap all).
    """
    w = _World(rng=random.Random(seed), now=now, ids=random.Random(f"{seed}:{ids}"))
    d = 0
    while len(w.facts) < facts:
        _division(w, d)
        if d % 3 == 0:
            name, other, relation, text = SIDE_PROJECTS[(d // 3) % len(SIDE_PROJECTS)]
            tag = "" if d < 12 else f" {d}"
            w.fact((name + tag, "project"), (other + tag, "dataset"), relation, text, w.when(10, 60), agent=CURSOR)
        d += 1
    return w


def _b64(vector: np.ndarray) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()


def demo_export(facts: int, *, org: str, scope: str, embed: Embed, now: datetime, seed: int = 0) -> list[dict[str, Any]]:
    """Export lines of one named scope `scope` holding the invented org (about `facts` fact versions).

    `embed` turns texts into 384-d vectors (the product's model, so search works on the result).
    """
    w = build_world(facts, now=now, seed=seed, ids=f"{org}/{scope}")
    rng = w.rng
    scope_id = w.uid()
    created = min(f.t_valid for f in w.facts) - DAY
    records: dict[str, list[dict[str, Any]]] = {name: [] for name in SECTIONS}
    records["scope"].append({
        "type": "scope", "id": scope_id, "name": scope, "kind": "named", "owner_agent": None,
        "description": "Invented demo data: a software org (teams, services, incidents). Not real.",
        "readers": ["*"], "writers": ["*"], "retention_days": None, "created_at": _iso(created),
        "embedding_model": MODEL_NAME,
    })
    records["agent"] = [{"type": "agent", "id": a, "description": f"demo agent ({t})", "created_at": _iso(created)}
                        for a, t in AGENTS.items()]
    keys = sorted(w.entities)
    entity_vectors = embed([w.names[k] for k in keys])
    audit: list[dict[str, Any]] = []
    for key, vector in zip(keys, entity_vectors, strict=True):
        eid, kind, first = w.entities[key]
        seen = first - timedelta(minutes=1)
        records["entity"].append({"type": "entity", "id": eid, "scope_id": scope_id, "name": w.names[key],
                                  "entity_type": kind, "embedding": _b64(vector), "created_by": CLAUDE,
                                  "created_at": _iso(seen)})
        audit.append({"kind": "entity_created", "agent_id": CLAUDE, "entity_id": eid, "fact_id": None,
                      "before": None, "after": {"name": w.names[key], "type": kind, "aliases": []},
                      "reason": f"new entity '{w.names[key]}'", "created_at": seen, "session_id": None,
                      "tool": "claude-code"})
    ordered = sorted(w.facts, key=lambda f: (f.t_valid, f.id))
    fact_vectors = embed([f.text for f in ordered])
    by_id = {f.id: f for f in ordered}
    for f, vector in zip(ordered, fact_vectors, strict=True):
        sid, tid = w.entities[f.source][0], w.entities[f.target][0]
        records["fact"].append({
            "type": "fact", "id": f.id, "scope_id": scope_id, "episode_id": None, "source_entity": sid,
            "target_entity": tid, "relation": f.relation, "text": f.text, "confidence": f.confidence,
            "causal_hint": f.causal_hint, "hint_origin": "write" if f.causal_hint else None,
            "t_valid": _iso(f.t_valid), "t_invalid": _iso(f.t_invalid) if f.t_invalid else None,
            "supersedes": f.supersedes, "agent_id": f.agent, "tool": AGENTS[f.agent], "project": f.project,
            "session_id": f.session, "written_at": _iso(f.t_valid), "tier": "hot", "access_count": 0,
            "last_read_at": None, "embedding": _b64(vector), "token_count": count_tokens(f.text),
        })
        edge = {"source": w.names[f.source], "target": w.names[f.target], "relation": f.relation}
        claim = {"text": f.text, "confidence": f.confidence, "causal_hint": f.causal_hint, "fact_id": f.id}
        if f.supersedes is None:
            audit.append({"kind": "fact_created", "fact_id": f.id, "before": None, "after": {**edge, **claim},
                          "reason": f"{f.agent} recorded that {f.text}"})
        else:
            old = by_id[f.supersedes]
            audit.append({"kind": "fact_superseded", "fact_id": f.id, "after": {**edge, **claim},
                          "before": {"text": old.text, "confidence": old.confidence, "causal_hint": old.causal_hint,
                                     "fact_id": old.id},
                          "reason": f"{f.agent} changed the claim on ({edge['source']}, {f.relation}, {edge['target']})"})
        audit[-1].update(agent_id=f.agent, entity_id=None, created_at=f.t_valid, session_id=f.session,
                         tool=AGENTS[f.agent])
    _reads(w, rng, scope, ordered, records)
    for n, a in enumerate(sorted(audit, key=lambda a: (a["created_at"], a["kind"] != "entity_created")), start=1):
        records["audit"].append({"type": "audit", "id": n, "scope_id": scope_id, "post_hoc": False, **a,
                                 "created_at": _iso(a["created_at"])})
    counts = {name: len(records[name]) for name in SECTIONS}
    header = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "schema_version": _schema_version(), "org": org,
              "scope": scope, "exported_at": _iso(now), "cutoff": _iso(now), "counts": counts}
    return [header, *(r for name in SECTIONS for r in records[name]), {"type": "end", "counts": counts}]


def _reads(w: _World, rng: random.Random, scope: str, ordered: list[_Fact], records: dict[str, list[dict[str, Any]]]) -> None:
    """Agents' reads of the scope (a tenth as many as facts), what each returned, and some saves."""
    services = [k for k, (_, kind, _) in w.entities.items() if kind == "service"]
    by_source: dict[str, list[_Fact]] = {}
    for f in ordered:
        by_source.setdefault(f.source, []).append(f)
    for _ in range(max(10, len(ordered) // 10)):
        svc = rng.choice(services)
        at = w.when(0.1, 60)
        valid = [f for f in by_source.get(svc, []) if f.t_valid <= at and (f.t_invalid is None or f.t_invalid > at)]
        returned = rng.sample(valid, min(len(valid), rng.randint(0, 6)))
        read_id = w.uid()
        agent = rng.choice(list(AGENTS))
        records["read"].append({
            "type": "read", "id": read_id, "agent_id": agent, "tool": AGENTS[agent],
            "query": rng.choice(QUESTIONS).format(svc=w.names[svc]), "scopes": [scope], "as_of": None,
            "tokens": sum(count_tokens(f.text) for f in returned), "created_at": _iso(at),
        })
        for rank, f in enumerate(returned, start=1):
            records["read_result"].append({"type": "read_result", "read_id": read_id, "item_id": f.id,
                                           "item_kind": "fact", "rank": rank, "score": round(0.8 - rank * 0.05, 3)})
        if returned and rng.random() < 0.25:
            records["recall_save"].append({
                "type": "recall_save", "id": w.uid(), "fact_id": returned[0].id, "read_id": read_id, "agent_id": agent,
                "note": "used this to answer without asking the team", "created_at": _iso(at + timedelta(minutes=2)),
            })


def _schema_version() -> int:
    from echo_memory.libs.server.store.migrations import CODE_SCHEMA_VERSION

    return CODE_SCHEMA_VERSION


def _iso(when: datetime) -> str:
    return when.isoformat()
