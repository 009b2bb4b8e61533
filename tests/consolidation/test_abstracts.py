"""Digest abstracts on the handler tier: the consolidation service's own check, store, audit and
listing, and the erasure that takes them away. No model runs here: the sentences are what a model
could send, and the server must refuse the bad ones whoever sends them."""

from __future__ import annotations

from typing import Any

import pytest
from tier_helpers import fact as _fact

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument, ScopeDenied
from echo_memory.libs.core.contracts.framing import OPEN_TAG
from echo_memory.libs.server.embed import count_tokens
from echo_memory.libs.testing.tiers import Handlers

ENTITIES = [("Billing service", "service"), ("Stripe", "vendor"), ("Postgres", "database"), ("Kafka", "queue")]
RETRIES = "The billing service retries failed charges three times through Stripe."
INVOICES = "The billing service stores invoices in Postgres 16."
EVENTS = "The billing service publishes invoice events to Kafka."
CONTENT = """
SELECT md5(string_agg(concat_ws('|', id, text, t_invalid, (SELECT tier FROM fact_tiers WHERE fact_id = facts.id)),
                      ',' ORDER BY id))
FROM facts
"""


def _caller(handlers: Handlers, agent: str = "echo-abstracts", write: tuple[str, ...] = ("*",)) -> Caller:
    return Caller(org=handlers.org, agent_id=agent, read_scopes=["*"], write_scopes=list(write),
                  tool="echo-memory consolidate abstract")


async def _store(handlers: Handlers, facts: list[dict[str, Any]]) -> None:
    writer = Caller(org=handlers.org, agent_id="claude-code", read_scopes=["shared"], write_scopes=["shared"])
    result = await handlers.call(writer, "writes", "write_episode", {
        "session_id": "s-1", "entities": [{"name": n, "type": t} for n, t in ENTITIES], "facts": facts})
    assert result["stored"] is True, result
    await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})


async def _entity_digest(handlers: Handlers) -> dict[str, Any]:
    page = await handlers.call(_caller(handlers), "consolidation", "abstract_candidates", {"scope": "shared"})
    [digest] = [d for d in page["digests"] if d["entity"] == "Billing service"]
    return dict(digest)


async def _count(handlers: Handlers, query: str) -> int:
    row = await (await handlers.conn.execute(query)).fetchone()
    return int(row[0])  # type: ignore[index]


def _ids(digest: dict[str, Any]) -> dict[str, str]:
    return {m["text"]: m["fact_id"] for m in digest["members"]}


async def _write(handlers: Handlers, digest: dict[str, Any], sentences: list[tuple[str, list[str]]],
                 dry_run: bool = False, caller: Caller | None = None) -> dict[str, Any]:
    return await handlers.call(caller or _caller(handlers), "consolidation", "write_abstract", {
        "digest_id": digest["digest_id"], "model": "stand-in-model", "dry_run": dry_run,
        "sentences": [{"text": t, "cites": c} for t, c in sentences]})


async def test_only_a_checked_abstract_is_stored_audited_and_listed(handlers: Handlers) -> None:
    await _store(handlers, [_fact("Billing service", "Stripe", "retries through", RETRIES),
                            _fact("Billing service", "Postgres", "stores invoices in", INVOICES),
                            _fact("Billing service", "Kafka", "publishes to", EVENTS)])
    digest = await _entity_digest(handlers)
    ids = _ids(digest)
    assert set(ids) == {RETRIES, INVOICES, EVENTS}
    good = [("Billing retries failed charges 3 times via Stripe.", [ids[RETRIES]]),
            ("It keeps invoices in Postgres 16 and sends invoice events to Kafka.", [ids[INVOICES], ids[EVENTS]])]
    dry = await _write(handlers, digest, good, dry_run=True)
    assert (dry["accepted"], dry["stored"], dry["abstract_id"], dry["problems"]) == (True, False, None, [])
    assert await _count(handlers, "SELECT count(*) FROM digest_abstracts") == 0

    invented = [good[0], ("It keeps invoices in Postgres 17.", [ids[INVOICES]])]
    verdict = await _write(handlers, digest, invented, dry_run=True)
    assert [(p["sentence"], p["reason"]) for p in verdict["problems"]] == [(2, "unsupported_number")]
    with pytest.raises(InvalidArgument, match=r"nothing stored: sentence 2 \(unsupported_number\): '17'"):
        await _write(handlers, digest, invented)
    # A stored fact that is not a member of this digest version neither counts as a citation nor supports.
    writer = Caller(org=handlers.org, agent_id="claude-code", read_scopes=["shared"], write_scopes=["shared"])
    outside = await handlers.call(writer, "writes", "write_episode", {
        "session_id": "s-2", "entities": [{"name": "Stripe", "type": "vendor"}, {"name": "Kafka", "type": "queue"}],
        "facts": [_fact("Stripe", "Kafka", "feeds", "Stripe retries feed Kafka.")]})
    outsider = [("Billing retries failed charges via Stripe.", [outside["edges_created"][0]["fact_id"]])]
    verdict = await _write(handlers, digest, outsider, dry_run=True)
    assert [p["reason"] for p in verdict["problems"]] == ["not_a_member", "unsupported_name"]
    assert await _count(handlers, "SELECT count(*) FROM digest_abstracts") == 0

    before = await (await handlers.conn.execute(CONTENT)).fetchone()
    stored = await _write(handlers, digest, good)
    assert stored["stored"] is True and stored["scope"] == "shared"
    row = await (await handlers.conn.execute(
        "SELECT digest_id::text, model, written_by, cited_ids::text[], text FROM digest_abstracts")).fetchone()
    assert row is not None
    assert row[:3] == (digest["digest_id"], "stand-in-model", "echo-abstracts")
    assert sorted(row[3]) == sorted(ids.values())
    [(kind, post_hoc, after)] = await (await handlers.conn.execute(
        "SELECT kind, post_hoc, after FROM audit_log WHERE kind = 'digest_abstract_written'")).fetchall()
    assert (kind, post_hoc, after["abstract_id"]) == ("digest_abstract_written", True, stored["abstract_id"])
    assert after["sentences"][0]["text"] == good[0][0]
    assert await (await handlers.conn.execute(CONTENT)).fetchone() == before  # no fact changed
    with pytest.raises(InvalidArgument, match="already has an abstract"):
        await _write(handlers, digest, good)
    page = await handlers.call(_caller(handlers), "consolidation", "abstract_candidates", {"scope": "shared"})
    assert digest["digest_id"] not in [d["digest_id"] for d in page["digests"]]

    reader = Caller(org=handlers.org, agent_id="cursor", read_scopes=["shared"], write_scopes=[])
    listed = await handlers.call(reader, "consolidation", "digest_abstracts", {})
    [item] = listed["items"]
    assert (item["origin"], item["entity"], item["model"]) == ("model", "Billing service", "stand-in-model")
    assert listed["text"].startswith(OPEN_TAG) and "written by your own model stand-in-model" in listed["text"]
    assert listed["memory_notice"].startswith("Recalled memory")
    # The brief quotes the abstract under its digest's summary and counts it in the budget.
    brief = await handlers.call(reader, "consolidation", "brief", {"max_tokens": 4000})
    [quoted] = [i for i in brief["items"] if i["digest_id"] == digest["digest_id"]]
    assert (quoted["abstract"], quoted["abstract_model"]) == (" ".join(t for t, _ in good), "stand-in-model")
    summary_tokens = await _count(handlers, f"SELECT token_count FROM digests WHERE id = '{digest['digest_id']}'")
    assert quoted["tokens"] == summary_tokens + count_tokens(quoted["abstract"])
    assert f"{quoted['summary']}\nAbstract written by your own model stand-in-model" in brief["text"]
    assert good[1][0] in brief["text"] and brief["tokens"] == sum(i["tokens"] for i in brief["items"])
    tight = await handlers.call(reader, "consolidation", "brief", {"max_tokens": summary_tokens})
    assert digest["digest_id"] not in [i["digest_id"] for i in tight["items"]]
    with pytest.raises(ScopeDenied):  # reading a scope is not enough to write an abstract of its digest
        await _write(handlers, digest, good, caller=_caller(handlers, "cursor", write=()))

    # A rebuilt digest is a new version: it does not inherit the abstract, and is a candidate again.
    await _store(handlers, [_fact("Billing service", "Kafka", "publishes to", "The billing service also publishes "
                                                                             "refunds to Kafka.")])
    assert (await handlers.call(reader, "consolidation", "digest_abstracts", {}))["items"] == []
    rebuilt_brief = await handlers.call(reader, "consolidation", "brief", {"max_tokens": 4000})
    assert all(i["abstract"] is None for i in rebuilt_brief["items"])
    rebuilt = await _entity_digest(handlers)
    assert rebuilt["digest_id"] != digest["digest_id"]
    with pytest.raises(InvalidArgument, match="replaced by a later consolidation run"):
        await _write(handlers, digest, good, dry_run=True)


async def test_erasing_a_cited_fact_erases_the_abstract_and_tombstones_its_audit_row(handlers: Handlers) -> None:
    await _store(handlers, [_fact("Billing service", "Stripe", "retries through", RETRIES),
                            _fact("Billing service", "Postgres", "stores invoices in", INVOICES),
                            _fact("Billing service", "Kafka", "publishes to", EVENTS)])
    digest = await _entity_digest(handlers)
    ids = _ids(digest)
    stored = await _write(handlers, digest, [("Billing retries failed charges 3 times via Stripe.", [ids[RETRIES]])])
    dry = await handlers.admin_call("writes", "forget", {"fact_id": ids[RETRIES]})
    assert dry["counts"]["digest_abstracts"] == 1 and dry["ids"]["digest_abstracts"] == [stored["abstract_id"]]
    assert await _count(handlers, "SELECT count(*) FROM digest_abstracts") == 1  # a dry run erases nothing

    await handlers.admin_call("writes", "forget", {"fact_id": ids[RETRIES], "confirm": True, "reason": "request"})
    assert await _count(handlers, "SELECT count(*) FROM digest_abstracts") == 0
    [(after, reason)] = await (await handlers.conn.execute(
        "SELECT after::text, reason FROM audit_log WHERE kind = 'digest_abstract_written'")).fetchall()
    assert "Stripe" not in after and "erasure_id" in after and reason.startswith("erased by")
