"""`python lab/causal_chains.py [--answer]`: the causal dev set through write_episode and trace_cause.

33 chains of 2–4 cause → effect links (78 links; 98 episodes with the distractors). Each link
is written in its own episode by one of four agents (in turn), in three projects, alternately
as `led_to` from the cause and `caused_by` from the effect; later links often name an entity
the way another agent would (another case, a hyphen, a declared alias, an abbreviation).
Beside them, look-alike distractors (a version, a number or one word swapped: "Payments API
v7", "Postgres 16 upgrade", "transaction cache eviction") with causal links of their own, some
declared in one episode with the real name.

A chain is exact when `trace_cause` on its last effect returns exactly one chain, with exactly
its entities in order. Without `--answer` every episode is sent once, as a client that ignores
deferrals would; with `--answer` the writer answers each deferral as the agent would (the
candidate that is the entity it meant, else "new") and sends the episode again.

The file imports only the product (libs.*), so the same set can run against another checkout:
`PYTHONPATH=/path/to/checkout python lab/causal_chains.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from echo_memory.libs.local.eval.system import throwaway_stack
from echo_memory.libs.testing import EchoStack

AGENTS = ("claude-code", "cursor", "codex", "windsurf")
PROJECTS = ("checkout", "platform", "billing")


@dataclass
class ChainSpec:
    names: list[str]
    # Canonical name -> the spelling later links use for it (written by another agent).
    spelled: dict[str, str] = field(default_factory=dict)
    # Canonical name -> aliases the first episode naming it declares.
    aliases: dict[str, list[str]] = field(default_factory=dict)
    # (look-alike, its effect, the chain entity it looks like, declared in one episode with it?)
    distractor: tuple[str, str, str, bool] | None = None


CHAINS: list[ChainSpec] = [
    ChainSpec(["Release 42", "Cache stampede", "Checkout outage"], {"Cache stampede": "cache-stampede"},
              distractor=("Release 41", "Search latency", "Release 42", False)),
    ChainSpec(["Expired TLS certificate", "API gateway errors", "Mobile login failures"],
              {"API gateway errors": "API-gateway errors"},
              distractor=("Expired SSH certificate", "Deploy freeze", "Expired TLS certificate", True)),
    ChainSpec(["Postgres 15 upgrade", "Slow invoice queries", "Billing backlog", "Late invoices"],
              distractor=("Postgres 16 upgrade", "Faster reports", "Postgres 15 upgrade", True)),
    ChainSpec(["Card network timeout", "Payments API", "Ledger drift", "Refund errors"], {"Payments API": "payments-api"},
              distractor=("Payments API v7", "Webhook retries", "Payments API", True)),
    ChainSpec(["session cache eviction", "Login storms", "Auth service overload"],
              distractor=("transaction cache eviction", "Ledger lag", "session cache eviction", False)),
    ChainSpec(["Security patch deadline", "Kubernetes upgrade", "Node pool drain", "Pod evictions", "Queue backlog"],
              {"Kubernetes upgrade": "k8s upgrade"}, {"Kubernetes upgrade": ["k8s upgrade"]},
              distractor=("Kubernetes 1.29 upgrade", "CSI driver crash", "Kubernetes upgrade", False)),
    ChainSpec(["Disk full on db-replica-2", "Replication lag", "Stale dashboards"],
              distractor=("Disk full on db-replica-3", "Backup failure", "Disk full on db-replica-2", True)),
    ChainSpec(["Config push", "Latency spike", "SLO breach"], {"Latency spike": "latency spike"},
              distractor=("Config pull", "Cache warmup", "Config push", False)),
    ChainSpec(["Memory leak in worker", "Worker restarts", "Duplicate emails"],
              distractor=("Connection leak in worker", "Pool exhaustion", "Memory leak in worker", True)),
    ChainSpec(["Pricing experiment", "Feature flag rollout", "Canary errors", "Rollback"],
              {"Feature flag rollout": "flag rollout"},
              {"Feature flag rollout": ["flag rollout"]}),
    ChainSpec(["DNS misconfiguration", "Service discovery failures", "Checkout timeouts", "Abandoned carts"],
              {"Checkout timeouts": "checkout timeouts"},
              distractor=("DNS migration", "TTL change", "DNS misconfiguration", False)),
    ChainSpec(["Rate limiter bug", "Partner API throttling", "Sync failures"],
              distractor=("Rate limit policy change", "Quota emails", "Rate limiter bug", False)),
    ChainSpec(["Schema v3 migration", "Null order totals", "Revenue report gap"],
              distractor=("Schema v4 migration", "Index rebuild", "Schema v3 migration", True)),
    ChainSpec(["Stripe outage", "Payment failures", "Support ticket surge"], {"Payment failures": "payment failures"}),
    ChainSpec(["Cron drift", "Nightly export delay", "Finance escalation"]),
    ChainSpec(["Logging agent update", "Log rotation failure", "Disk pressure", "Pod crash loop", "Search outage"],
              {"Log rotation failure": "log-rotation failure", "Pod crash loop": "pod crash-loop"}),
    ChainSpec(["Python 3.12 upgrade", "C extension build errors", "CI red"],
              distractor=("Python 3.11 upgrade", "Faster tests", "Python 3.12 upgrade", True)),
    ChainSpec(["Redis failover", "Session loss", "Forced logouts"],
              distractor=("Redis Sentinel failover", "Alert noise", "Redis failover", False)),
    ChainSpec(["Load balancer misroute", "Staging traffic leak", "Test orders in production"]),
    ChainSpec(["Token expiry change", "Mobile refresh loop", "Battery complaints"],
              distractor=("Token expiry alert", "Pager fatigue", "Token expiry change", False)),
    ChainSpec(["Manual console change", "Terraform drift", "Security group opened", "Audit finding"],
              {"Terraform drift": "terraform drift"}),
    ChainSpec(["Clock skew on us-east-1", "JWT validation errors", "API 401 spike"],
              distractor=("Clock skew on us-east-2", "Cron overlap", "Clock skew on us-east-1", True)),
    ChainSpec(["Batch size increase", "OOM kills", "Missed SLA"], {"OOM kills": "OOM-kills"}),
    ChainSpec(["Index drop", "Full table scans", "Database CPU saturation", "Checkout latency"],
              distractor=("Index rebuild plan", "Maintenance window", "Index drop", False)),
    ChainSpec(["Webhook signature change", "Partner rejections", "Order sync gap"],
              {"Partner rejections": "partner rejections"}),
    ChainSpec(["GraphQL schema change", "Mobile app crash", "App store rating drop"],
              distractor=("REST schema change", "SDK regeneration", "GraphQL schema change", False)),
    ChainSpec(["Certificate rotation script bug", "mTLS handshake failures", "Internal API outage"]),
    ChainSpec(["Autoscaler misconfiguration", "Under-provisioned cluster", "Black Friday slowdown"],
              {"Under-provisioned cluster": "under provisioned cluster"}),
    ChainSpec(["CDN cache purge", "Origin overload", "Image timeouts"],
              distractor=("CDN cache warmup", "Edge hit ratio rise", "CDN cache purge", True)),
    ChainSpec(["Broker restart", "Kafka partition rebalance", "Consumer lag", "Delayed notifications"],
              {"Kafka partition rebalance": "Apache Kafka partition rebalance"}),
    ChainSpec(["Email template bug", "Wrong invoice links", "Customer confusion"],
              {"Wrong invoice links": "wrong invoice links"}),
    ChainSpec(["Read replica promotion", "Write conflicts", "Data repair project"],
              distractor=("Write replica promotion", "Failback drill", "Read replica promotion", False)),
    ChainSpec(["Traffic growth", "Postgres connection limit", "Pool timeouts", "Order API errors"],
              {"Postgres connection limit": "PostgreSQL connection limit"}),
]


@dataclass
class Episode:
    agent: str
    project: str
    entities: list[dict[str, Any]]
    facts: list[dict[str, Any]]
    meant: dict[str, str]  # the name as written -> the entity the writer means (canonical name)


def _link(spec: ChainSpec, chain: int, i: int, declared: set[str]) -> Episode:
    cause, effect = spec.names[i], spec.names[i + 1]
    turn = chain + i
    # The entity shared with the previous link is named the way this (other) agent spells it.
    cause_as = spec.spelled.get(cause, cause) if i > 0 else cause
    effect_as = effect
    entities = []
    for canonical, written in ((cause, cause_as), (effect, effect_as)):
        entity: dict[str, Any] = {"name": written, "type": "event"}
        if canonical not in declared and canonical in spec.aliases:
            entity["aliases"] = spec.aliases[canonical]
        declared.add(canonical)
        entities.append(entity)
    if turn % 2 == 0:
        fact = {"source": cause_as, "target": effect_as, "relation": "led to", "causal_hint": "led_to",
                "fact": f"{cause_as} led to {effect_as.lower()}."}
    else:
        fact = {"source": effect_as, "target": cause_as, "relation": "was caused by", "causal_hint": "caused_by",
                "fact": f"{effect_as} was caused by {cause_as.lower()}."}
    fact["confidence"] = "extracted"
    return Episode(AGENTS[turn % len(AGENTS)], PROJECTS[turn % len(PROJECTS)], entities, [fact],
                   {cause_as: cause, effect_as: effect})


def _distractor(spec: ChainSpec, chain: int) -> Episode | None:
    if spec.distractor is None:
        return None
    lookalike, effect, real, together = spec.distractor
    entities = [{"name": lookalike, "type": "event"}, {"name": effect, "type": "event"}]
    facts = [{"source": lookalike, "target": effect, "relation": "led to", "causal_hint": "led_to",
              "fact": f"{lookalike} led to {effect.lower()}.", "confidence": "extracted"}]
    if together:
        # Declared beside the real name in one episode: the two are different entities.
        entities.append({"name": real, "type": "event"})
        facts.append({"source": lookalike, "target": real, "relation": "is not the same as",
                      "fact": f"{lookalike} is a different event from {real.lower()}.", "confidence": "extracted"})
    agent = AGENTS[(chain + 3) % len(AGENTS)]
    return Episode(agent, PROJECTS[chain % len(PROJECTS)], entities, facts,
                   {lookalike: lookalike, effect: effect, real: real})


def episodes(chains: list[ChainSpec] = CHAINS) -> list[Episode]:
    """Every episode in the order written: round by round (first links, distractors, second links, …)."""
    declared: list[set[str]] = [set() for _ in chains]
    rounds: list[list[Episode]] = []
    longest = max(len(s.names) - 1 for s in chains)
    for i in range(longest):
        rounds.append([_link(s, c, i, declared[c]) for c, s in enumerate(chains) if i < len(s.names) - 1])
        if i == 0:
            rounds.append([d for c, s in enumerate(chains) if (d := _distractor(s, c)) is not None])
    return [e for r in rounds for e in r]


async def _write(stack: EchoStack, tokens: dict[str, str], ep: Episode, n: int, answer: bool) -> dict[str, int]:
    args: dict[str, Any] = {"session_id": f"{ep.agent}-{n}", "project": ep.project, "entities": ep.entities,
                            "facts": ep.facts}
    outcome = {"deferred": 0, "answered": 0, "lost_facts": 0}
    async with stack.client(tokens[ep.agent]) as client:
        result = (await client.call_tool("write_episode", args)).structured_content or {}
        deferred = result.get("deferred") or []
        outcome["deferred"] = len(deferred)
        if deferred and answer:
            resolutions = []
            for d in deferred:
                meant = ep.meant.get(d["mention"], d["mention"]).casefold()
                pick = next((c["entity_id"] for c in d["candidates"] if c["name"].casefold() == meant), "new")
                resolutions.append({"mention": d["mention"], "entity_id": pick})
            result = (await client.call_tool("write_episode", {**args, "entity_resolutions": resolutions})
                      ).structured_content or {}
            outcome["answered"] = len(resolutions)
        stored = len(result.get("edges_created") or []) + len(result.get("restated") or [])
        outcome["lost_facts"] = len(ep.facts) - stored
    return outcome


async def apply(stack: EchoStack, chains: list[ChainSpec], answer: bool) -> dict[str, Any]:
    """Write every episode of `chains` and trace each chain; the figures of one run."""
    tokens = {a: stack.issue_token(a) for a in AGENTS}
    totals = {"deferred": 0, "answered": 0, "lost_facts": 0}
    written = episodes(chains)
    for n, ep in enumerate(written):
        for k, v in (await _write(stack, tokens, ep, n, answer)).items():
            totals[k] += v
    misses = []
    exact = 0
    async with stack.client(tokens["codex"]) as reader:
        for spec in chains:
            result = (await reader.call_tool("trace_cause", {"topic": spec.names[-1]})).structured_content or {}
            got = [c["entities"] for c in result.get("chains", [])]
            if got == [spec.names]:
                exact += 1
            else:
                misses.append({"expected": spec.names, "got": got})
    agents_per_chain = [len({AGENTS[(c + i) % len(AGENTS)] for i in range(len(s.names) - 1)})
                        for c, s in enumerate(chains)]
    return {
        "chains": len(chains), "links": sum(len(s.names) - 1 for s in chains), "episodes": len(written),
        "distractors": sum(1 for s in chains if s.distractor), "answer_deferrals": answer,
        "multi_agent_chains": sum(1 for n in agents_per_chain if n > 1),
        "exact": exact, "exact_share": round(exact / len(chains), 4), **totals, "misses": misses,
    }


async def run(answer: bool) -> dict[str, Any]:
    async with throwaway_stack() as stack:
        return await apply(stack, CHAINS, answer)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answer", action="store_true", help="answer deferrals as the writing agent would")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.answer)), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
