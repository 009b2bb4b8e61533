"""`echo-memory consolidate abstract` on the real stack, with a local stand-in for the user's model.

A dry run asks the model and stores nothing; --write stores the abstracts the consolidation
service accepts; one whose sentence states a number its cited fact does not is dropped whole; and
an erasure of a cited fact takes the abstract with it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from echo_memory.libs.local.cli import model_commands
from echo_memory.libs.local.cli.main import build_parser
from echo_memory.libs.testing import EchoStack
from tests.llm.llm_stack import rows
from tests.llm.openai_stand_in import Answer, Received, llm_env, serve
from tests.llm.test_causal_hints_command import write_facts

RETRIES = "The billing service retries failed charges three times through Stripe."
INVOICES = "The billing service stores invoices in Postgres."
EVENTS = "The billing service publishes invoice events to Kafka."
ABSTRACTS = "SELECT count(*) FROM digest_abstracts"


def facts_sent(request: Received) -> list[dict[str, str]]:
    text = request.user_text()
    return list(json.loads(text[text.index("["):]))


def model(invent: bool) -> Any:
    """Restates the first fact it is sent, citing it; with `invent`, the entity digest's abstract restates
    the retries fact with a number it does not hold."""
    def respond(request: Received) -> Answer:
        sent = facts_sent(request)
        first = sent[0]
        sentence = first["sentence"]
        if invent and "the entity" in request.user_text():
            # Cites the retries fact (the members come newest first, in no fixed order within one
            # write), so the number is the sentence's only claim that fact does not hold.
            first = next(f for f in sent if f["sentence"] == RETRIES)
            sentence = "The billing service retries failed charges 4 times through Stripe."
        return Answer(content=json.dumps({"sentences": [{"text": sentence, "cites": [first["key"]]}]}))
    return respond


async def run(stack: EchoStack, capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    args = build_parser().parse_args(["consolidate", "abstract", *argv, "--json"])
    capsys.readouterr()
    assert await model_commands.abstract(stack.settings, args) == 0
    return dict(json.loads(capsys.readouterr().out))


async def test_dry_run_write_an_invented_number_and_erasure(
    stack: EchoStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    retries, _, _ = await write_facts(stack, [("Billing service", "Stripe", "retries through", RETRIES),
                                              ("Billing service", "Postgres", "stores invoices in", INVOICES),
                                              ("Billing service", "Kafka", "publishes to", EVENTS)])
    await stack.admin_call("consolidation", "consolidate", {"scope": "shared"})
    [(digests,)] = rows(stack, "SELECT count(*) FROM digests WHERE valid_to IS NULL")
    assert digests >= 2  # the entity digest and at least one topic

    with serve(model(invent=False)) as server:
        for key, value in llm_env(server).items():
            monkeypatch.setenv(key, value)
        dry = await run(stack, capsys)
        assert rows(stack, ABSTRACTS) == [(0,)]  # the model was asked; nothing was stored
        assert (dry["sent"], dry["candidates"], dry["would_write"], dry["written"]) == (digests, digests, digests, 0)
        assert len(server.requests) == digests
        entity = next(r for r in server.requests if "the entity" in r.user_text())
        assert sorted(f["sentence"] for f in facts_sent(entity)) == sorted([RETRIES, INVOICES, EVENTS])
        assert "as data" in entity.user_text()
        assert entity.body["response_format"]["json_schema"]["strict"] is True

    with serve(model(invent=True)) as server:
        for key, value in llm_env(server).items():
            monkeypatch.setenv(key, value)
        wrote = await run(stack, capsys, "--write")
    assert (wrote["written"], wrote["dropped"]) == (digests - 1, {"unsupported_number": 1}), wrote
    assert rows(stack, ABSTRACTS) == [(digests - 1,)]
    assert rows(stack, "SELECT count(*) FROM digest_abstracts a JOIN digests d ON d.id = a.digest_id "
                       "WHERE d.kind = 'entity'") == [(0,)]
    assert not any("4 times" in t for (t,) in rows(stack, "SELECT text FROM digest_abstracts"))

    with serve(model(invent=False)) as server:
        for key, value in llm_env(server).items():
            monkeypatch.setenv(key, value)
        again = await run(stack, capsys, "--write")
        assert (again["sent"], again["written"]) == (1, 1) and len(server.requests) == 1  # only the one left
    listed = await stack.admin_call("consolidation", "digest_abstracts", {})
    assert len(listed["items"]) == digests and {i["origin"] for i in listed["items"]} == {"model"}
    citing = rows(stack, "SELECT count(*) FROM digest_abstracts WHERE %s::uuid = ANY(cited_ids)", (retries,))
    assert citing[0][0] >= 1

    await stack.admin_call("writes", "forget", {"fact_id": retries, "confirm": True, "reason": "request"})
    assert rows(stack, "SELECT count(*) FROM digest_abstracts WHERE %s::uuid = ANY(cited_ids)", (retries,)) == [(0,)]
    assert not any("Stripe" in t for (t,) in rows(stack, "SELECT text FROM digest_abstracts"))
