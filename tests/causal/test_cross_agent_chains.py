"""Causal chains across agents through the real stack: links written by different agents, in either
direction, through aliases and spelling variants, beside look-alike distractors, compose into one chain."""

from __future__ import annotations

from typing import Any

from echo_memory.libs.testing import EchoStack
from lab import causal_chains as dev_set


def _fact(source: str, target: str, text: str, hint: str) -> dict[str, Any]:
    return {"source": source, "target": target, "relation": "led to" if hint == "led_to" else "was caused by",
            "fact": text, "confidence": "extracted", "causal_hint": hint}


async def _write(stack: EchoStack, agent: str, entities: list[dict[str, Any]], facts: list[dict[str, Any]]) -> dict[str, Any]:
    async with stack.client(stack.issue_token(agent)) as client:
        result = await client.call_tool("write_episode", {"session_id": f"{agent}-1", "project": agent,
                                                          "entities": entities, "facts": facts})
    assert result.structured_content is not None
    return dict(result.structured_content)


async def test_three_agents_both_directions_an_alias_a_variant_and_a_lookalike_make_one_chain(stack: EchoStack) -> None:
    first = await _write(stack, "claude-code", [
        {"name": "Security patch deadline", "type": "event"},
        {"name": "Kubernetes upgrade", "type": "change", "aliases": ["k8s upgrade"]},
    ], [_fact("Security patch deadline", "Kubernetes upgrade", "The security patch deadline led to the Kubernetes upgrade.",
              "led_to")])
    # Another agent, from the effect's side, names the cause by its alias.
    second = await _write(stack, "cursor", [
        {"name": "Node-pool drain", "type": "event"}, {"name": "k8s upgrade", "type": "change"},
    ], [_fact("Node-pool drain", "k8s upgrade", "The node-pool drain was caused by the k8s upgrade.", "caused_by")])
    # A third spells the drain differently and declares a look-alike upgrade beside it.
    third = await _write(stack, "codex", [
        {"name": "node pool drain", "type": "event"}, {"name": "Pod evictions", "type": "event"},
        {"name": "Kubernetes 1.29 upgrade", "type": "change"}, {"name": "CSI driver crash", "type": "event"},
    ], [_fact("node pool drain", "Pod evictions", "The node pool drain led to pod evictions.", "led_to"),
        _fact("Kubernetes 1.29 upgrade", "CSI driver crash", "The Kubernetes 1.29 upgrade led to a CSI driver crash.",
              "led_to")])
    for result in (first, second, third):
        assert result["stored"] is True and result["deferred"] == [], result
    assert [a["rule"] for a in third["aliased"]] == ["same_form"]
    async with stack.client(stack.issue_token("windsurf")) as reader:
        answer = (await reader.call_tool("trace_cause", {"topic": "Pod evictions"})).structured_content
    assert answer is not None
    assert [c["entities"] for c in answer["chains"]] == [
        ["Security patch deadline", "Kubernetes upgrade", "Node-pool drain", "Pod evictions"]]
    writers = [s["provenance"]["agent_id"] for s in answer["chains"][0]["steps"]]
    assert writers == ["claude-code", "cursor", "codex"]


async def test_a_slice_of_the_causal_dev_set_comes_back_exact(stack: EchoStack) -> None:
    # Chains with a distractor or a respelling; a deferral is answered as the writing agent would.
    chosen = [c for c in dev_set.CHAINS if c.distractor or c.spelled][:8]
    figures = await dev_set.apply(stack, chosen, answer=True)
    assert figures["multi_agent_chains"] == len(chosen)
    assert figures["lost_facts"] == 0
    assert figures["exact"] == len(chosen), figures["misses"]
