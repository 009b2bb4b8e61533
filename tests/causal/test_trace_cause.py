"""trace_cause as agents call it through the edge: chains, empty kinds, loops, as_of, hostile input.

Every fact is written through write_episode; nothing is inserted by hand. On the handler tier,
except where the answer depends on which of two writes came first (the step one agent stated and
another restated, a chain as of a second): there each request commits at its own time, on every
service's routes on the in-memory broker. tests/causal/test_cross_agent_chains.py keeps the whole
path, agents over HTTP through the edge.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from mcp import Client

from echo_memory.libs.local.stack import tool_error
from echo_memory.libs.testing.agents import Agent, Routes
from echo_memory.libs.testing.tiers import Handlers


def _fact(source: str, target: str, relation: str, text: str, hint: str | None = None) -> dict[str, Any]:
    fact: dict[str, Any] = {"source": source, "target": target, "relation": relation, "fact": text,
                            "confidence": "extracted"}
    if hint:
        fact["causal_hint"] = hint
    return fact


async def write(client: Client | Agent, entities: list[tuple[str, str]], facts: list[dict[str, Any]],
                session: str = "s-1", **extra: Any) -> dict[str, Any]:
    result = await client.call_tool("write_episode", {
        "session_id": session, "project": "ops",
        "entities": [{"name": n, "type": t} for n, t in entities], "facts": facts, **extra,
    })
    assert not result.is_error, result.content
    assert result.structured_content["stored"] is True, result.structured_content
    return result.structured_content


async def trace(client: Client | Agent, **args: Any) -> dict[str, Any]:
    result = await client.call_tool("trace_cause", args)
    assert not result.is_error, result.content
    return result.structured_content


def step_pairs(chain: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["from"], s["to"]) for s in chain["steps"]]


async def test_led_to_and_caused_by_from_two_agents_compose_into_one_chain(routes: Routes) -> None:
    claude = Agent(routes, "claude-code")
    first = await write(claude, [("Release 42", "release"), ("Cache stampede", "incident")], [
        _fact("Release 42", "Cache stampede", "triggered", "Release 42 led to a cache stampede.", "led_to"),
    ])
    cursor = Agent(routes, "cursor")
    second = await write(cursor, [("Checkout outage", "incident"), ("Cache stampede", "incident"),
                                  ("Release 42", "release")], [
        _fact("Checkout outage", "Cache stampede", "was caused by",
              "The checkout outage was caused by the cache stampede.", "caused_by"),
        # The same step as claude-code's, phrased from the other end: must not become a second step.
        _fact("Cache stampede", "Release 42", "was caused by",
              "The cache stampede was caused by release 42.", "caused_by"),
    ], session="s-2")
    answer = await trace(cursor, topic="checkout OUTAGE")

    assert answer["resolution"] == "exact"
    assert [m["name"] for m in answer["matched"]] == ["Checkout outage"]
    assert answer["empty_kind"] is None
    assert answer["chains_found"] == 1 and len(answer["chains"]) == 1
    chain = answer["chains"][0]
    assert chain["entities"] == ["Release 42", "Cache stampede", "Checkout outage"]
    assert step_pairs(chain) == [("Release 42", "Cache stampede"), ("Cache stampede", "Checkout outage")]
    first_step, second_step = chain["steps"]
    assert first_step["fact_id"] == first["edges_created"][0]["fact_id"]
    assert first_step["hint"] == "led_to" and first_step["polarity"] == "causing"
    assert first_step["provenance"]["agent_id"] == "claude-code"
    assert [e["fact_id"] for e in first_step["also_stated_by"]] == [second["edges_created"][1]["fact_id"]]
    assert first_step["also_stated_by"][0]["hint"] == "caused_by"
    assert first_step["also_stated_by"][0]["provenance"]["agent_id"] == "cursor"
    assert second_step["hint"] == "caused_by" and second_step["provenance"]["agent_id"] == "cursor"
    assert second_step["fact_id"] == second["edges_created"][0]["fact_id"]
    assert "1 chain" in answer["message"]


async def test_enabling_and_blocking_hints_point_from_cause_to_effect_and_contradicts_sits_beside(
    handlers: Handlers,
) -> None:
    client = Agent(handlers, "codex")
    await write(client, [("Feature flag rollout", "change"), ("Canary deploy", "process"),
                         ("Load test", "process"), ("Postmortem draft", "document")], [
        _fact("Canary deploy", "Feature flag rollout", "was enabled by",
              "The canary deploy was enabled by the feature flag rollout.", "enabled_by"),
        _fact("Load test", "Canary deploy", "was blocked by", "The load test was blocked by the canary deploy.",
              "blocked_by"),
        _fact("Postmortem draft", "Canary deploy", "disputes",
              "The postmortem draft says the canary deploy never happened.", "contradicts"),
    ])
    answer = await trace(client, topic="Canary deploy")
    assert answer["chains_found"] == 1
    chain = answer["chains"][0]
    assert chain["entities"] == ["Feature flag rollout", "Canary deploy", "Load test"]
    assert [s["polarity"] for s in chain["steps"]] == ["enabling", "blocking"]
    assert [c["text"] for c in answer["contradictions"]] == ["The postmortem draft says the canary deploy never happened."]
    assert all("Postmortem draft" not in c["entities"] for c in answer["chains"])


async def test_each_empty_kind_is_named_by_enum_and_sentence(handlers: Handlers) -> None:
    client = Agent(handlers, "claude-code")
    nothing = await trace(client, topic="Payments service")
    await write(client, [("Payments service", "service"), ("Stripe", "vendor")], [
        _fact("Payments service", "Stripe", "charges cards through",
              "The payments service charges cards through Stripe."),
    ])
    unhinted = await trace(client, topic="payments service")
    no_match = await trace(client, topic="the migration of arctic terns")
    await write(client, [("Disk full", "incident"), ("Log rotation", "process")], [
        _fact("Log rotation", "Disk full", "prevents", "Log rotation was blocked by the disk being full.",
              "blocked_by"),
    ])
    unconnected = await trace(client, topic="Stripe")

    assert nothing["empty_kind"] == "no_entity_matched" and nothing["chains"] == []
    assert nothing["resolution"] == "none" and "No entity" in nothing["message"]
    assert no_match["empty_kind"] == "no_entity_matched" and no_match["matched"] == []
    assert unhinted["empty_kind"] == "no_causes_recorded"
    assert unhinted["matched"][0]["name"] == "Payments service"
    assert "no fact" in unhinted["message"] and "causal hint" in unhinted["message"]
    assert unconnected["empty_kind"] == "no_chain_connects"
    assert "1 fact(s)" in unconnected["message"] and "'Stripe'" in unconnected["message"]
    assert len({nothing["message"], unhinted["message"], unconnected["message"]}) == 3


async def test_free_text_falls_back_to_the_entities_of_the_nearest_facts_and_says_so(handlers: Handlers) -> None:
    client = Agent(handlers, "claude-code")
    await write(client, [("Expired TLS certificate", "incident"), ("API gateway errors", "incident")], [
        _fact("Expired TLS certificate", "API gateway errors", "led to",
              "The expired TLS certificate led to errors at the API gateway.", "led_to"),
    ])
    answer = await trace(client, topic="why did the gateway start failing requests")
    assert answer["resolution"] == "dense"
    assert {m["matched_by"] for m in answer["matched"]} == {"dense"}
    assert {m["name"] for m in answer["matched"]} == {"Expired TLS certificate", "API gateway errors"}
    assert step_pairs(answer["chains"][0]) == [("Expired TLS certificate", "API gateway errors")]
    assert "nearest facts" in answer["message"]


async def test_a_loop_is_cut_reported_once_and_never_repeats_an_entity(handlers: Handlers) -> None:
    client = Agent(handlers, "claude-code")
    await write(client, [("Queue backlog", "signal"), ("Retry storm", "incident"), ("Worker timeouts", "signal")], [
        _fact("Queue backlog", "Retry storm", "led to", "The queue backlog led to a retry storm.", "led_to"),
        _fact("Retry storm", "Worker timeouts", "led to", "The retry storm led to worker timeouts.", "led_to"),
        _fact("Worker timeouts", "Queue backlog", "led to", "Worker timeouts led to a queue backlog.", "led_to"),
    ])
    answer = await trace(client, topic="Queue backlog")
    assert len(answer["cycles"]) == 1
    cycle = answer["cycles"][0]
    assert cycle["entities"][0] == cycle["entities"][-1]
    assert set(cycle["entities"]) == {"Queue backlog", "Retry storm", "Worker timeouts"}
    assert answer["chains"], answer["message"]
    for chain in answer["chains"]:
        assert len(chain["entities"]) == len(set(chain["entities"]))
        assert "Queue backlog" in chain["entities"]
    assert "loop" in answer["message"]


async def test_as_of_walks_a_superseded_fact_only_while_it_was_valid(routes: Routes) -> None:
    entities = [("Config push", "change"), ("Latency spike", "incident")]
    client = Agent(routes, "claude-code")
    before_anything = int(time.time()) - 5
    old = await write(client, entities, [
        _fact("Config push", "Latency spike", "explains", "The config push led to the latency spike.", "led_to"),
    ])
    time.sleep(1.1)
    between = int(time.time())
    # `as_of` names the whole second it gives: the new version must come in a later second.
    time.sleep(between + 1 - time.time() + 0.05)
    new = await write(client, entities, [
        _fact("Config push", "Latency spike", "explains",
              "On review, the config push did not explain the latency spike."),
    ], session="s-2")
    then = await trace(client, topic="Latency spike", as_of=between)
    now = await trace(client, topic="Latency spike")
    too_early = await trace(client, topic="Latency spike", as_of=before_anything)
    assert new["edges_created"][0]["supersedes"] == old["edges_created"][0]["fact_id"]
    assert then["empty_kind"] is None
    assert then["chains"][0]["steps"][0]["fact_id"] == old["edges_created"][0]["fact_id"]
    assert then["chains"][0]["steps"][0]["provenance"]["valid_until"] is not None
    assert now["chains"] == [] and now["empty_kind"] == "no_causes_recorded"
    assert too_early["empty_kind"] == "no_entity_matched"


async def test_max_depth_and_max_chains_bound_the_answer_and_say_so(handlers: Handlers) -> None:
    names = [f"Stage {c}" for c in "ABCDE"]
    client = Agent(handlers, "claude-code")
    await write(client, [(n, "stage") for n in names] + [("Side cause", "stage")], [
        *[_fact(a, b, "led to", f"{a} led to {b}.", "led_to") for a, b in itertools.pairwise(names)],
        _fact("Side cause", "Stage C", "led to", "Side cause led to Stage C.", "led_to"),
    ])
    full = await trace(client, topic="Stage C")
    shallow = await trace(client, topic="Stage C", max_depth=1)
    one = await trace(client, topic="Stage C", max_chains=1)
    assert [c["entities"] for c in full["chains"]] == [
        ["Stage A", "Stage B", "Stage C", "Stage D", "Stage E"], ["Side cause", "Stage C", "Stage D", "Stage E"],
    ]
    assert {tuple(c["entities"]) for c in shallow["chains"]} == {
        ("Stage B", "Stage C", "Stage D"), ("Side cause", "Stage C", "Stage D"),
    }
    assert "beyond max_depth" in shallow["message"]
    assert one["chains_found"] == 2 and len(one["chains"]) == 1 and one["truncated"] is True
    assert one["chains"][0]["length"] == 4


HOSTILE = [
    ({"topic": "x", "max_depth": 1000}, "invalid_argument", "max_depth"),
    ({"topic": "x", "max_depth": 0}, "invalid_argument", "max_depth"),
    ({"topic": "x", "max_chains": 10_000}, "invalid_argument", "max_chains"),
    ({"topic": ""}, "invalid_argument", "topic"),
    ({"topic": "x" * 5000}, "invalid_argument", "topic"),
    ({"topic": "x", "as_of": -1}, "invalid_argument", "as_of"),
    ({"topic": "x", "bogus": 1}, "invalid_argument", "bogus"),
    ({"topic": "x", "scope": "team-secret"}, "scope_denied", "team-secret"),
    ({"topic": "x", "scope": ["shared", "team-secret"]}, "scope_denied", "team-secret"),
    ({"topic": "x", "scope": "solo:someone-else"}, "invalid_argument", "solo:"),
]


async def test_hostile_arguments_get_typed_errors(handlers: Handlers) -> None:
    # Each case is a separate call, so one refusal cannot hide another.
    client = Agent(handlers, "claude-code")
    for arguments, code, fragment in HOSTILE:
        result = await client.call_tool("trace_cause", arguments)
        assert result.is_error, arguments
        error = tool_error(result)
        assert (error["code"], error["retryable"]) == (code, False), (arguments, error)
        assert fragment in error["message"], (arguments, error)


async def test_a_named_scope_the_token_grants_but_that_does_not_exist_is_not_found(handlers: Handlers) -> None:
    client = Agent(handlers, "claude-code", read=["shared", "team-ghost"])
    result = await client.call_tool("trace_cause", {"topic": "x", "scope": "team-ghost"})
    assert result.is_error and tool_error(result)["code"] == "not_found"


async def test_a_solo_scope_is_traced_only_for_its_owner(handlers: Handlers) -> None:
    owner = Agent(handlers, "claude-code")
    await write(owner, [("Private hunch", "idea"), ("Refactor plan", "plan")], [
        _fact("Private hunch", "Refactor plan", "led to", "My private hunch led to the refactor plan.", "led_to"),
    ], scope="solo")
    mine = await trace(owner, topic="Refactor plan", scope="solo")
    shared = await trace(owner, topic="Refactor plan")
    other = Agent(handlers, "cursor")
    theirs = await trace(other, topic="Refactor plan", scope="solo")
    assert mine["chains_found"] == 1
    assert mine["chains"][0]["steps"][0]["provenance"]["scope"] == "solo"
    assert shared["empty_kind"] == "no_entity_matched"
    assert theirs["empty_kind"] == "no_entity_matched"
