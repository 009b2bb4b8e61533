"""`echo-memory distil` on the real stack, with a local stand-in for the user's model (the provider is not reachable).

Three imported turns: the model's reply to the first holds one fact with a verbatim quote (stored,
with provenance) and one without (dropped); its reply to the second is not JSON (dropped, the turn
left pending); the third is rate limited once, then answered. Then: a dry run changes nothing,
--write stores, a re-run stores nothing twice, --clear --write makes exactly those facts non-current.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from echo_memory.libs.testing import EchoStack
from tests.llm.llm_stack import counts, current_facts, rows, run_command
from tests.llm.openai_stand_in import Answer, Received, rate_limited, serve

TURNS = {
    "t-jsonb": "user: why Postgres?\nassistant: We chose Postgres over MySQL because we need JSONB columns. "
               "The webhook sender retries three times with exponential backoff.",
    "t-billing": "user: what does billing do?\nassistant: The billing service sends invoices on the first of the month.",
    "t-deploy": "user: how do we ship?\nassistant: Deploys run from GitHub Actions on every merge to main.",
}
VERBATIM = "We chose Postgres over MySQL because we need JSONB columns"
POSTGRES_FACT = "The team chose Postgres over MySQL because it needs JSONB columns."
DEPLOY_FACT = "Deploys run from GitHub Actions on every merge to main."
EARLIER_CLAIM = "Postgres was picked over MySQL for its extensions."
OTHER_CLAIM = "The cache layer stores sessions in Redis."


def reply(entities: list[tuple[str, str]], facts: list[tuple[str, str, str, str, str]]) -> Answer:
    return Answer(content=json.dumps({
        "entities": [{"name": n, "type": t} for n, t in entities],
        "facts": [{"source": s, "target": t, "relation": r, "fact": f, "confidence": "extracted", "quote": q}
                  for s, t, r, f, q in facts]}))


class Model:
    """The stand-in's script: an answer per turn, chosen by the turn's text."""

    def __init__(self) -> None:
        self.deploy_asks = 0

    def __call__(self, request: Received) -> Answer:
        text = request.user_text()
        if "JSONB" in text:
            return reply([("Postgres", "database"), ("MySQL", "database"), ("webhook sender", "component"),
                          ("retry policy", "decision")],
                         [("Postgres", "MySQL", "chosen over", POSTGRES_FACT, VERBATIM),
                          ("webhook sender", "retry policy", "uses", "The webhook sender retries three times.",
                           "the webhook sender retries 3 times")])  # not in the turn: dropped
        if "billing" in text:
            return Answer(content="Sure! The billing service sends invoices monthly.")  # not JSON: dropped
        if "GitHub Actions" in text:
            self.deploy_asks += 1
            if self.deploy_asks == 1:
                return rate_limited("0")
            return reply([("Deploys", "process"), ("GitHub Actions", "service")],
                         [("Deploys", "GitHub Actions", "run from", DEPLOY_FACT, DEPLOY_FACT.rstrip("."))])
        return Answer(status=400, body={"error": {"message": "unexpected prompt"}})


async def import_turns(stack: EchoStack) -> dict[str, str]:
    episodes = [{"content": text, "source": "codex", "external_id": key, "session_id": "s-1", "project": "app"}
                for key, text in TURNS.items()]
    result = await stack.admin_call("writes", "import_episodes", {"episodes": episodes})
    return dict(zip(TURNS, result["episode_ids"], strict=True))


async def write_as_claude(stack: EchoStack, facts: list[tuple[str, str, str, str]]) -> list[str]:
    entities = sorted({(s, "thing") for s, _, _, _ in facts} | {(t, "thing") for _, t, _, _ in facts})
    args: dict[str, Any] = {
        "session_id": "c-1", "entities": [{"name": n, "type": t} for n, t in entities],
        "facts": [{"source": s, "target": t, "relation": r, "fact": f, "confidence": "extracted"} for s, t, r, f in facts]}
    async with stack.client(stack.issue_token("claude-code")) as client:
        result = await client.call_tool("write_episode", args)
    assert not result.is_error and result.structured_content["stored"], result.content
    return [e["fact_id"] for e in result.structured_content["edges_created"]]


async def pending(stack: EchoStack) -> list[str]:
    return [e["episode_id"] for e in (await stack.admin_call("writes", "pending_episodes", {}))["episodes"]]


async def test_distil_dry_run_write_rerun_and_clear(
    stack: EchoStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = await import_turns(stack)
    earlier, other = await write_as_claude(stack, [("Postgres", "MySQL", "chosen over", EARLIER_CLAIM),
                                                   ("cache layer", "Redis", "stores sessions in", OTHER_CLAIM)])
    model = Model()
    with serve(model) as server:
        before = counts(stack)
        code, dry = await run_command(stack, server, capsys, monkeypatch, "distil")
        assert code == 0
        assert counts(stack) == before  # a dry run stores nothing, not even bookkeeping
        assert (dry["write"], dry["sent"], dry["malformed_replies"], dry["candidates"], dry["would_write"],
                dry["written"]) == (False, 3, 1, 3, 2, 0)
        assert dry["dropped"] == {"quote not verbatim in the turn": 1}
        assert dry["requests"] == 4  # the 429 was retried once
        planned = {f["fact"] for item in dry["items"] for f in item["facts"]}
        assert planned == {POSTGRES_FACT, DEPLOY_FACT}
        # Only the turns were sent, each delimited as data.
        assert all("<turn>" in r.user_text() for r in server.requests)

        model.deploy_asks = 0
        code, wrote = await run_command(stack, server, capsys, monkeypatch, "distil", "--write")
        assert code == 0 and wrote["written"] == 2, wrote
        distilled = rows(stack, "SELECT id::text, text, tool, supersedes::text FROM facts "
                                "WHERE agent_id = 'echo-distil' ORDER BY text")
        assert [(t, tool) for _, t, tool, _ in distilled] == [(DEPLOY_FACT, "echo-memory distil"),
                                                            (POSTGRES_FACT, "echo-memory distil")]
        postgres_id = next(i for i, t, _, _ in distilled if t == POSTGRES_FACT)
        assert next(s for _, t, _, s in distilled if t == POSTGRES_FACT) == earlier  # a new version of the edge
        audit = rows(stack, "SELECT kind, post_hoc, after->'source_episode_ids' FROM audit_log "
                            "WHERE agent_id = 'echo-distil' AND fact_id IS NOT NULL ORDER BY id")
        assert sorted((k, p, tuple(s)) for k, p, s in audit) == sorted(
            [("fact_created", True, (ids["t-deploy"],)), ("fact_superseded", True, (ids["t-jsonb"],))])
        assert all(p for (p,) in rows(stack, "SELECT post_hoc FROM audit_log WHERE agent_id = 'echo-distil'"))
        why = await stack.admin_call("audit", "why", {"fact_id": postgres_id})
        assert why["written_by"]["agent_id"] == "echo-distil"
        assert any(ids["t-jsonb"] in a["reason"] for a in why["audit"]), why["audit"]
        assert rows(stack, "SELECT episode_id::text, agent_id FROM episode_distillations ORDER BY 1") == sorted(
            [(ids["t-jsonb"], "echo-distil"), (ids["t-deploy"], "echo-distil")])
        assert await pending(stack) == [ids["t-billing"]]  # the malformed reply left its turn pending

        after_write = counts(stack)
        asked = len(server.requests)
        code, again = await run_command(stack, server, capsys, monkeypatch, "distil", "--write")
        assert code == 0 and again["written"] == 0 and again["sent"] == 1  # only the pending turn is sent again
        assert len(server.requests) == asked + 1
        assert counts(stack)["facts"] == after_write["facts"]

    # --clear asks no model: no endpoint configured from here on.
    monkeypatch.delenv("ECHO_MEMORY_LLM_API_KEY")
    before_clear = counts(stack)
    code, text = await run_command(stack, None, capsys, monkeypatch, "distil", "--clear", as_json=False)
    assert code == 0 and f"would end (dry run: nothing changed) {postgres_id} (shared); restored {earlier}" in text
    assert "2 current fact version(s) written by echo-distil; 2 imported turn(s) would be pending again" in text
    code, listed = await run_command(stack, None, capsys, monkeypatch, "distil", "--clear")
    assert code == 0 and listed["applied"] is False
    assert {f["text"] for f in listed["facts"]} == {POSTGRES_FACT, DEPLOY_FACT}
    assert sorted(listed["released_episodes"]) == sorted([ids["t-jsonb"], ids["t-deploy"]])
    assert counts(stack) == before_clear

    code, cleared = await run_command(stack, None, capsys, monkeypatch, "distil", "--clear", "--write")
    assert code == 0 and cleared["applied"] is True
    restored = {f["restored_from"] for f in cleared["facts"]}
    assert restored == {earlier, None}
    # Exactly the distilled facts stopped being current; the claim the distil fact replaced is back,
    # under its own author; the unrelated fact is the same row it was.
    assert current_facts(stack) == {("claude-code", EARLIER_CLAIM), ("claude-code", OTHER_CLAIM)}
    assert rows(stack, "SELECT t_invalid IS NULL FROM facts WHERE id = %s", (other,)) == [(True,)]
    assert rows(stack, "SELECT count(*) FROM facts WHERE agent_id = 'echo-distil' AND t_invalid IS NULL") == [(0,)]
    assert sorted(await pending(stack)) == sorted(ids.values())  # every turn may be distilled again
    assert rows(stack, "SELECT count(*), bool_and(post_hoc) FROM audit_log WHERE kind = 'post_hoc_cleared'") == [(3, True)]
    assert counts(stack)["facts"] == before_clear["facts"] + 1  # one restored copy; nothing deleted

    settled = counts(stack)
    code, nothing = await run_command(stack, None, capsys, monkeypatch, "distil", "--clear", "--write")
    assert code == 0 and nothing["facts"] == [] and nothing["released_episodes"] == []
    assert counts(stack) == settled
