"""`echo-memory infer-causal-hints` on the real stack, with a local stand-in for the user's model.

Only sentences with a causal connective are sent; a hint is recorded only with a verbatim quote
of its own sentence, as a new version audited post-hoc; a re-run records nothing twice; --clear
--write ends the hint versions and the claims they annotated are current again, unhinted.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.local.llm.jobs import distil_caller
from echo_memory.libs.server.bus.broker import make_broker
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.libs.testing import EchoStack
from tests.llm.llm_stack import counts, current_facts, rows, run_command
from tests.llm.openai_stand_in import Answer, Received, serve

TLS = "Deploys failed because the TLS certificate expired."
REDIS = "The team uses Redis for caching."
FREEZE = "The outage led to a freeze on Friday deploys."
ADYEN = "Payments moved to Adyen due to lower fees."
GATEWAY = "The API gateway was rewritten because the old gateway leaked memory."


def items(request: Received) -> list[dict[str, str]]:
    text = request.user_text()
    return list(json.loads(text[text.index("["):]))


def model(request: Received) -> Answer:
    """caused_by with a verbatim quote for 'because'; a quote not in the sentence for 'led to'; none for 'due to'."""
    hints: list[dict[str, Any]] = []
    for item in items(request):
        sentence = item["sentence"]
        if "because" in sentence:
            hints.append({"id": item["id"], "causal_hint": "caused_by", "quote": sentence[sentence.index("because"):-1]})
        elif "led to" in sentence:
            hints.append({"id": item["id"], "causal_hint": "led_to", "quote": "resulted in a freeze"})
        else:
            hints.append({"id": item["id"], "causal_hint": "none", "quote": ""})
    hints.append({"id": "99", "causal_hint": "led_to", "quote": "an item nobody sent"})
    return Answer(content=json.dumps({"hints": hints}))


async def write_facts(stack: EchoStack, facts: list[tuple[str, str, str, str]], caller: Any = None) -> list[str]:
    names = sorted({s for s, *_ in facts} | {t for _, t, *_ in facts})
    args: dict[str, Any] = {
        "session_id": "w-1", "entities": [{"name": n, "type": "thing"} for n in names],
        "facts": [{"source": s, "target": t, "relation": r, "fact": f, "confidence": "extracted"} for s, t, r, f in facts]}
    if caller is not None:  # as a post-hoc identity: only the host's bus can, no token carries it
        broker = make_broker(stack.nats_url)
        await broker.start()
        try:
            result = await BusClient(broker).call_by_name(caller=caller, service="writes", verb="write_episode", args=args,
                                                  timeout=30)
        finally:
            await broker.stop()
        return [e["fact_id"] for e in result["edges_created"]]
    async with stack.client(stack.issue_token("claude-code")) as client:
        answer = await client.call_tool("write_episode", args)
    assert not answer.is_error and answer.structured_content["stored"], answer.content
    return [e["fact_id"] for e in answer.structured_content["edges_created"]]


async def test_hints_dry_run_write_rerun_and_clear(
    stack: EchoStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tls, redis, freeze, adyen = await write_facts(stack, [
        ("Deploys", "TLS certificate", "failed because of", TLS), ("team", "Redis", "uses", REDIS),
        ("outage", "deploy freeze", "led to", FREEZE), ("Payments", "Adyen", "moved to", ADYEN)])
    with serve(model) as server:
        before = counts(stack)
        code, dry = await run_command(stack, server, capsys, monkeypatch, "infer-causal-hints")
        assert code == 0 and counts(stack) == before
        sent = [i["sentence"] for r in server.requests for i in items(r)]
        assert sorted(sent) == sorted([TLS, FREEZE, ADYEN])  # the sentence without a connective never left
        assert all("Redis" not in json.dumps(r.body) for r in server.requests)
        assert dry["skipped"] == {"no causal connective; not sent": 1}
        assert (dry["sent"], dry["candidates"], dry["would_write"], dry["written"]) == (3, 3, 1, 0)
        assert dry["dropped"] == {"quote not verbatim in the sentence": 1, "id not among the items sent": 1}
        assert [(i["fact_id"], i["causal_hint"]) for i in dry["items"]] == [(tls, "caused_by")]

        code, text = await run_command(stack, server, capsys, monkeypatch, "infer-causal-hints", as_json=False)
        assert code == 0 and counts(stack) == before
        assert f'fact {tls}: caused_by (quoting "because the TLS certificate expired"): {TLS}' in text
        assert "would write 1 (dry run: nothing written)" in text and "1 no causal connective; not sent" in text

        code, wrote = await run_command(stack, server, capsys, monkeypatch, "infer-causal-hints", "--write")
        assert code == 0 and wrote["written"] == 1, wrote
        [(hinted, hint, origin, agent, supersedes)] = rows(
            stack, "SELECT id::text, causal_hint, hint_origin, agent_id, supersedes::text FROM facts "
                   "WHERE t_invalid IS NULL AND causal_hint IS NOT NULL")
        assert (hint, origin, agent, supersedes) == ("caused_by", "post_hoc", "echo-causal-hints", tls)
        assert rows(stack, "SELECT t_invalid IS NULL FROM facts WHERE id = %s", (tls,)) == [(False,)]
        [(kind, post_hoc, quote)] = rows(stack, "SELECT kind, post_hoc, after->>'quote' FROM audit_log "
                                                "WHERE fact_id = %s", (hinted,))
        assert (kind, post_hoc, quote) == ("causal_hint_added", True, "because the TLS certificate expired")
        chain = await stack.admin_call("causal", "trace_cause", {"topic": "Deploys"})
        steps = [(s["fact_id"], s["hint"]) for c in chain["chains"] for s in c["steps"]]
        assert (hinted, "caused_by") in steps  # trace_cause walks the new hint

        asked, stored = len(server.requests), counts(stack)["facts"]
        code, again = await run_command(stack, server, capsys, monkeypatch, "infer-causal-hints", "--write")
        assert code == 0 and again["written"] == 0 and again["sent"] == 2  # the hinted fact is not asked again
        assert len(server.requests) == asked + 1 and counts(stack)["facts"] == stored

    monkeypatch.delenv("ECHO_MEMORY_LLM_API_KEY")
    code, cleared = await run_command(stack, None, capsys, monkeypatch, "infer-causal-hints", "--clear", "--write")
    assert code == 0 and [(f["fact_id"], f["restored_from"]) for f in cleared["facts"]] == [(hinted, tls)]
    assert current_facts(stack) == {("claude-code", t) for t in (TLS, REDIS, FREEZE, ADYEN)}
    assert rows(stack, "SELECT count(*) FROM facts WHERE t_invalid IS NULL AND causal_hint IS NOT NULL") == [(0,)]
    untouched = rows(stack, "SELECT count(*) FROM facts WHERE id = ANY(%s::uuid[]) AND t_invalid IS NULL",
                     ([redis, freeze, adyen],))
    assert untouched == [(3,)]


async def test_clearing_distil_also_ends_the_hints_added_on_its_facts_but_not_on_others(
    stack: EchoStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    [distilled] = await write_facts(stack, [("API gateway", "old gateway", "replaced", GATEWAY)],
                                    caller=distil_caller(stack.org))
    [theirs] = await write_facts(stack, [("Deploys", "TLS certificate", "failed because of", TLS)])
    with serve(model) as server:
        code, wrote = await run_command(stack, server, capsys, monkeypatch, "infer-causal-hints", "--write")
    assert code == 0 and wrote["written"] == 2
    code, cleared = await run_command(stack, None, capsys, monkeypatch, "distil", "--clear", "--write")
    assert code == 0 and [f["text"] for f in cleared["facts"]] == [GATEWAY]
    assert cleared["facts"][0]["restored_from"] is None  # the distil fact had no earlier claim
    # The distilled claim is gone from the present with its hint; the hint on another agent's claim stays.
    assert {t for _, t in current_facts(stack)} == {TLS}
    assert rows(stack, "SELECT agent_id, causal_hint, supersedes::text FROM facts WHERE t_invalid IS NULL") == [
        ("echo-causal-hints", "caused_by", theirs)]
    assert rows(stack, "SELECT count(*) FROM facts WHERE id = %s", (distilled,)) == [(1,)]  # ended, never deleted


async def test_add_causal_hints_refuses_a_foreign_quote_and_skips_a_fact_changed_meanwhile(stack: EchoStack) -> None:
    [tls] = await write_facts(stack, [("Deploys", "TLS certificate", "failed because of", TLS)])
    before = counts(stack)
    with pytest.raises(InvalidArgument, match="not a verbatim part of its sentence"):
        await stack.admin_call("writes", "add_causal_hints", {"session_id": "s", "hints": [
            {"fact_id": tls, "causal_hint": "caused_by", "quote": "because the certificate was revoked"}]})
    assert counts(stack) == before
    # Another agent changes the claim after the listing: the hint must not bring the old sentence back.
    [changed] = await write_facts(stack, [("Deploys", "TLS certificate", "failed because of",
                                           "Deploys failed because the TLS certificate was revoked.")])
    result = await stack.admin_call("writes", "add_causal_hints", {"session_id": "s", "hints": [
        {"fact_id": tls, "causal_hint": "caused_by", "quote": "because the TLS certificate expired"}]})
    assert result == {"added": [], "skipped": [{"fact_id": tls, "reason": "the fact is no longer current"}]}
    assert rows(stack, "SELECT id::text FROM facts WHERE t_invalid IS NULL") == [(changed,)]
