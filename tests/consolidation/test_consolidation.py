"""Consolidation on the handler tier: tiers from what the store records, digests built from facts,
runs that can be undone, and the brief. Facts are written through the real write path; their age
is set afterwards, as months of use would have set it."""

from __future__ import annotations

from typing import Any

import pytest
from tier_helpers import fact as _fact

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound, ScopeDenied
from echo_memory.libs.core.contracts.framing import CLOSE_TAG, OPEN_TAG
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.consolidation import brief as brief_module

CONTENT = """
SELECT md5(string_agg(concat_ws('|', id, scope_id, source_entity, target_entity, relation, text, confidence,
       t_valid, t_invalid, supersedes, agent_id, written_at, embedding::text), E'\\n' ORDER BY id)), count(*)
FROM facts
"""
# Where each fact's row version sits (ctid): writing a row, even an unchanged copy and within the
# same transaction, puts a new version elsewhere.
ROW_VERSIONS = "SELECT md5(string_agg(id::text || ':' || ctid::text, ',' ORDER BY id)) FROM facts"
TIERS = "SELECT f.text, coalesce(ft.tier, 'hot') FROM facts f LEFT JOIN fact_tiers ft ON ft.fact_id = f.id"


def _writer(handlers: Handlers, agent: str = "claude-code") -> Caller:
    return Caller(org=handlers.org, agent_id=agent, read_scopes=["shared"], write_scopes=["shared"])


async def _write(handlers: Handlers, entities: list[tuple[str, str]], facts: list[dict[str, Any]],
                 project: str = "billing", resolutions: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    args = {"session_id": "s-1", "project": project,
            "entities": [{"name": n, "type": t} for n, t in entities], "facts": facts,
            "entity_resolutions": [{"mention": m, "entity_id": "new"} for m in resolutions]}
    result = await handlers.call(_writer(handlers), "writes", "write_episode", args)
    assert result["stored"] is True, result
    return result


async def _fact_id(handlers: Handlers, text: str) -> str:
    row = await (await handlers.conn.execute("SELECT id::text FROM facts WHERE text = %s", (text,))).fetchone()
    assert row is not None, text
    return str(row[0])


async def _tiers(handlers: Handlers) -> dict[str, str]:
    rows = await (await handlers.conn.execute(TIERS)).fetchall()
    return {r[0]: r[1] for r in rows}


async def _age(handlers: Handlers, text: str, days: int) -> None:
    await handlers.conn.execute(
        "UPDATE facts SET written_at = now() - make_interval(days => %s), t_valid = now() - make_interval(days => %s)"
        " WHERE text = %s", (days, days, text))


BILLING = [("Billing service", "service"), ("Postgres", "database"), ("Stripe", "vendor"), ("Kafka", "queue")]
OLD = "The billing service stores invoices in Postgres."
RECENT = "The billing service charges cards through Stripe."
SAVED = "The billing service publishes invoice events to Kafka."
FIRST = "The billing service retries failed charges twice."
SECOND = "The billing service retries failed charges five times."


async def _store(handlers: Handlers) -> None:
    await _write(handlers, BILLING, [
        _fact("Billing service", "Postgres", "stores invoices in", OLD),
        _fact("Billing service", "Stripe", "charges cards through", RECENT),
        _fact("Billing service", "Kafka", "publishes events to", SAVED),
        _fact("Billing service", "Stripe", "retries charges", FIRST),
    ])
    await _write(handlers, BILLING[:1] + BILLING[2:3], [_fact("Billing service", "Stripe", "retries charges", SECOND)])
    for text in (OLD, SAVED, FIRST, SECOND):
        await _age(handlers, text, 200)
    # The first retry count was replaced long ago: its version ended 120 days back.
    await handlers.conn.execute("UPDATE facts SET t_invalid = now() - interval '120 days' WHERE text = %s", (FIRST,))
    read = await handlers.call(_writer(handlers), "retrieval", "query_memory",
                               {"query": "where does billing publish invoice events", "top_k": 1})
    saved_id = await _fact_id(handlers, SAVED)
    assert read["results"][0]["id"] == saved_id
    await handlers.call(_writer(handlers), "writes", "record_recall_save",
                        {"fact_id": saved_id, "read_id": read["read_id"], "note": "the event topic"})
    await handlers.conn.execute("UPDATE reads SET created_at = now() - interval '100 days'")


async def test_each_fact_gets_the_tier_its_activity_gives_and_content_never_changes(handlers: Handlers) -> None:
    await _store(handlers)
    before = await (await handlers.conn.execute(CONTENT)).fetchone()
    versions = await (await handlers.conn.execute(ROW_VERSIONS)).fetchone()
    dry = await handlers.admin_call("consolidation", "consolidate", {"scope": "shared", "dry_run": True})
    assert dry["dry_run"] is True and dry["runs"][0]["run_id"] is None
    assert set((await _tiers(handlers)).values()) == {"hot"}  # a dry run changes nothing
    assert (await (await handlers.conn.execute("SELECT count(*) FROM digests")).fetchone())[0] == 0  # type: ignore[index]

    result = await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    (run,) = result["runs"]
    assert run["counts"] | {} == dry["runs"][0]["counts"] | {"digests_built": run["counts"]["digests_built"]}
    assert await _tiers(handlers) == {
        OLD: "consolidated",  # old, never read, still true
        RECENT: "hot",  # written today
        SAVED: "hot",  # an agent saved it: pinned
        FIRST: "archived",  # a version that ended 120 days ago
        SECOND: "consolidated",
    }
    counts = run["counts"]
    assert (counts["hot"], counts["consolidated"], counts["archived"]) == (2, 2, 1)
    assert (counts["demoted"], counts["unchanged"], counts["failed"], counts["skipped"]) == (3, 2, 0, 0)
    assert await (await handlers.conn.execute(CONTENT)).fetchone() == before
    moves = await (await handlers.conn.execute(
        "SELECT f.text, m.reason FROM tier_moves m JOIN facts f ON f.id = m.fact_id WHERE m.run_id = %s",
        (run["run_id"],))).fetchall()
    assert dict(moves) == {OLD: "inactive", SECOND: "inactive", FIRST: "ended_long_ago"}
    audit = await (await handlers.conn.execute(
        "SELECT after->>'run_id' FROM audit_log WHERE kind = 'consolidation_run'")).fetchall()
    assert audit == [(run["run_id"],)]
    # The moves went to fact_tiers: no fact's row was written, so its indexes took nothing in and
    # no write that ends one of those facts waits for a run.
    assert await (await handlers.conn.execute(ROW_VERSIONS)).fetchone() == versions

    # A recent read of an entity brings its current facts back: the read log decides, not age alone.
    await handlers.conn.execute("UPDATE reads SET created_at = now()")
    again = await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    tiers = await _tiers(handlers)
    assert tiers[OLD] == tiers[SECOND] == "hot" and tiers[FIRST] == "archived"
    assert again["runs"][0]["counts"]["promoted"] == 2


DIGEST_ROWS = ("SELECT kind, subject_id, member_hash, summary, embedding::text, parts FROM digests WHERE valid_to IS NULL "
               "ORDER BY kind, subject_id")


async def test_undo_puts_every_fact_and_digest_back(handlers: Handlers) -> None:
    await _store(handlers)
    first = (await handlers.admin_call("consolidation", "consolidate", {}))["runs"]
    shared = next(r for r in first if r["scope"] == "shared")
    run_id = shared["run_id"]
    digests = await (await handlers.conn.execute(DIGEST_ROWS)).fetchall()
    kinds = [row[0] for row in digests]
    assert kinds.count("entity") == 1  # only the billing service has three current facts
    assert kinds.count("topic") >= 1 and len(digests) == shared["counts"]["digests_built"]
    # Every current fact is a member of at least one topic: reachable through some digest.
    covered = await (await handlers.conn.execute(
        "SELECT count(*) FROM facts f WHERE f.t_invalid IS NULL AND NOT EXISTS (SELECT 1 FROM digests d "
        "WHERE d.kind = 'topic' AND d.valid_to IS NULL AND f.id = ANY(d.member_ids))")).fetchone()
    assert covered == (0,)

    undone = await handlers.admin_call("consolidation", "consolidate_undo", {"run_id": run_id})
    assert undone == {"run_id": run_id, "reverted": 3, "skipped": 0, "digests_reverted": len(digests),
                      "digests_reopened": 0}
    assert set((await _tiers(handlers)).values()) == {"hot"}
    assert (await (await handlers.conn.execute("SELECT count(*) FROM digests WHERE valid_to IS NULL")).fetchone())[0] == 0  # type: ignore[index]
    log = (await handlers.admin_call("consolidation", "consolidate_log", {"scope": "shared"}))["runs"]
    assert log[0]["run_id"] == run_id and log[0]["undone_at"] is not None

    # Rebuilt from scratch, every digest is the same: member set, hash, summary and vector.
    await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    assert await (await handlers.conn.execute(DIGEST_ROWS)).fetchall() == digests
    # A run over unchanged facts starts no new version.
    third = await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    assert third["runs"][0]["counts"]["digests_unchanged"] == len(digests)
    assert third["runs"][0]["counts"]["digests_built"] == 0

    with pytest.raises(InvalidArgument, match="already undone"):
        await handlers.admin_call("consolidation", "consolidate_undo", {"run_id": run_id})
    with pytest.raises(NotFound):
        await handlers.admin_call("consolidation", "consolidate_undo", {"run_id": "00000000-0000-0000-0000-000000000000"})
    with pytest.raises(InvalidArgument, match="not a run id"):
        await handlers.admin_call("consolidation", "consolidate_undo", {"run_id": "nope"})


async def test_a_digest_quotes_only_its_members_and_never_joins_look_alikes(handlers: Handlers) -> None:
    # Look-alike names: two versions of one API, and a company and a person who share a name.
    entities = [("Billing API v1", "service"), ("Billing API v2", "service"), ("Mercury", "company"),
                ("Mercury Jones", "person"), ("Ledger", "database"), ("Audit", "team")]
    await _write(handlers, entities, [
        _fact("Billing API v1", "Ledger", "reads", "Billing API v1 reads balances from the ledger."),
        _fact("Billing API v1", "Audit", "is owned by", "Billing API v1 is owned by the audit team."),
        _fact("Billing API v1", "Mercury", "is hosted by", "Billing API v1 is hosted by Mercury."),
        _fact("Billing API v2", "Ledger", "writes", "Billing API v2 writes balances to the ledger."),
        _fact("Billing API v2", "Audit", "reports to", "Billing API v2 reports to the audit team."),
        _fact("Billing API v2", "Mercury Jones", "is maintained by", "Billing API v2 is maintained by Mercury Jones."),
    ], resolutions=["Billing API v2", "Mercury Jones"])
    await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    rows = await (await handlers.conn.execute(
        "SELECT e.name, d.summary, d.member_ids::text[] FROM digests d JOIN entities e ON e.id = d.subject_id "
        "WHERE d.kind = 'entity' AND d.valid_to IS NULL ORDER BY e.name")).fetchall()
    by_name = {name: (summary, set(members)) for name, summary, members in rows}
    assert set(by_name) == {"Billing API v1", "Billing API v2"}  # the ledger and the team have two facts each
    v1, v2 = by_name["Billing API v1"], by_name["Billing API v2"]
    assert not v1[1] & v2[1]  # no fact is in both versions' digests
    assert "v2" not in v1[0].replace("Billing API v1", "") and "Mercury Jones" not in v1[0]
    assert "hosted by Mercury" in v1[0] and "Mercury Jones" in v2[0]
    # No digest of either kind holds facts about two look-alikes, though these facts share a session
    # and the ledger, the audit team or each other's wording.
    mixed = await (await handlers.conn.execute("""
        SELECT d.kind, array_agg(DISTINCT e.name ORDER BY e.name) FROM digests d
        JOIN facts f ON f.id = ANY(d.member_ids) JOIN entities e ON e.id IN (f.source_entity, f.target_entity)
        WHERE d.valid_to IS NULL GROUP BY d.id, d.kind""")).fetchall()
    assert mixed, "no digests were built"
    for kind, names in mixed:
        assert not {"Billing API v1", "Billing API v2"} <= set(names), (kind, names)
        assert not {"Mercury", "Mercury Jones"} <= set(names), (kind, names)
    for name, (_, members) in by_name.items():  # every member touches its digest's subject
        touching = await (await handlers.conn.execute(
            "SELECT count(*) FROM facts f JOIN entities e ON e.id IN (f.source_entity, f.target_entity) "
            "WHERE f.id = ANY(%s::uuid[]) AND e.name = %s", (list(members), name))).fetchone()
        assert touching == (len(members),), name


RANK = {"area": 0, "entity": 1, "topic": 2}


async def test_the_brief_fits_its_budget_is_framed_and_puts_the_project_first(
    handlers: Handlers, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = _writer(handlers, "codex")
    empty = await handlers.call(reader, "consolidation", "brief", {})
    assert empty["items"] == [] and "consolidate" in empty["note"]
    await _store(handlers)
    await _write(handlers, [("Web app", "service"), ("CDN", "vendor"), ("Node", "runtime")], [
        _fact("Web app", "CDN", "is served by", "The web app is served by the CDN."),
        _fact("Web app", "Node", "runs on", "The web app runs on Node 22."),
        _fact("Web app", "CDN", "purges", "The web app purges the CDN on deploy."),
    ], project="/home/dev/web")  # recorded as a path, asked for by its last part below
    # Billing is written last, so only the project puts the web digests first.
    await _write(handlers, BILLING[:2], [_fact("Billing service", "Postgres", "archives invoices in",
                                                "The billing service archives old invoices in Postgres.")])
    await handlers.admin_call("consolidation", "consolidate", {})
    brief = await handlers.call(reader, "consolidation", "brief", {"project": "web", "max_tokens": 2000})
    elsewhere = await handlers.call(reader, "consolidation", "brief", {"project": "/srv/checkout/web/", "max_tokens": 2000})
    assert elsewhere["items"] == brief["items"]
    anywhere = await handlers.call(reader, "consolidation", "brief", {"max_tokens": 2000})
    assert [item["entity"] for item in anywhere["items"] if item["kind"] == "entity"] == ["Billing service", "Web app"]
    entities = [item["entity"] for item in brief["items"] if item["kind"] == "entity"]
    assert entities == ["Web app", "Billing service"]
    # The web project's digests come before the billing ones; within each, areas, then entities, then
    # topics; a topic an area holds is quoted through its area, never beside it.
    webs = [any(w in item["summary"].lower() for w in ("web app", "cdn", "node")) for item in brief["items"]]
    first_other = webs.index(False)
    assert first_other > 0 and all(webs[:first_other]) and not any(webs[first_other:])
    for group in (brief["items"][:first_other], brief["items"][first_other:]):
        ranks = [RANK[item["kind"]] for item in group]
        assert ranks == sorted(ranks), ranks
    held = await (await handlers.conn.execute(
        "SELECT t.id::text FROM digests t JOIN digests a ON a.kind = 'area' AND a.valid_to IS NULL "
        "AND t.subject_id = ANY(a.parts) WHERE t.kind = 'topic' AND t.valid_to IS NULL")).fetchall()
    assert not {row[0] for row in held} & {item["digest_id"] for item in anywhere["items"] + brief["items"]}
    assert brief["text"].startswith(OPEN_TAG) and brief["text"].endswith(CLOSE_TAG)
    assert "The web app runs on Node 22." in brief["text"]
    assert brief["tokens"] == sum(item["tokens"] for item in brief["items"]) <= 2000
    smallest = min(item["tokens"] for item in brief["items"])
    tight = await handlers.call(reader, "consolidation", "brief", {"project": "web", "max_tokens": max(50, smallest)})
    assert 1 <= len(tight["items"]) < len(brief["items"]) and tight["tokens"] <= max(50, smallest)
    assert tight["digests_available"] == brief["digests_available"] == len(brief["items"])
    # A large store's brief reads only the first digests in its order, and still counts them all.
    monkeypatch.setattr(brief_module, "CANDIDATE_ROWS", 2)
    capped = await handlers.call(reader, "consolidation", "brief", {"project": "web", "max_tokens": 2000})
    assert capped["items"] == brief["items"][:2] and capped["digests_available"] == brief["digests_available"] > 2
    outsider = Caller(org=handlers.org, agent_id="ops-bot", read_scopes=["team-ops"], write_scopes=[])
    with pytest.raises(ScopeDenied):
        await handlers.call(outsider, "consolidation", "brief", {"scope": "shared"})


async def test_only_the_admin_consolidates_and_bad_input_changes_nothing(handlers: Handlers) -> None:
    await _store(handlers)
    with pytest.raises(ScopeDenied):
        await handlers.call(_writer(handlers), "consolidation", "consolidate", {})
    with pytest.raises(NotFound, match="does not exist"):
        await handlers.admin_call("consolidation", "consolidate", {"scope": "nowhere"})
    with pytest.raises(InvalidArgument):
        await handlers.admin_call("consolidation", "consolidate", {"scope": "shared", "dry": True})
    assert set((await _tiers(handlers)).values()) == {"hot"}
    assert (await (await handlers.conn.execute("SELECT count(*) FROM consolidation_runs")).fetchone())[0] == 0  # type: ignore[index]


async def test_a_failed_automatic_run_is_recorded_and_health_says_so_until_a_run_succeeds(handlers: Handlers) -> None:
    await _store(handlers)
    scope_id = str((await (await handlers.conn.execute("SELECT id FROM scopes WHERE name = 'shared'")).fetchone())[0])  # type: ignore[index]
    scheduler = handlers.context("consolidation").extra["scheduler"]

    async def check() -> dict[str, Any]:
        health = await handlers.admin_call("audit", "health", {})
        return next(c for c in health["checks"] if c["name"] == "consolidation")

    assert (await check())["status"] == "strong"
    # A real failure of a whole step: the digests' table is gone while the run stores them.
    await handlers.conn.execute("ALTER TABLE digests RENAME TO digests_away")
    await scheduler.run_scope(handlers.org, scope_id)
    await handlers.conn.execute("ALTER TABLE digests_away RENAME TO digests")
    assert await (await handlers.conn.execute("SELECT count(*) FROM consolidation_runs")).fetchone() == (0,)
    recorded = await (await handlers.conn.execute(
        "SELECT scope_id::text, actor, code FROM consolidation_failures")).fetchall()
    assert recorded == [(scope_id, "consolidation", "internal")]
    failed = await check()
    assert failed["status"] == "weak" and failed["points"] == 0 and "failed" in failed["detail"]
    assert "echo-memory consolidate" in failed["action"]

    await scheduler.run_scope(handlers.org, scope_id)
    recovered = await check()
    assert recovered["status"] == "weak" and recovered["points"] == 2.5, recovered
    assert "1 consolidation runs failed" in recovered["detail"]


PAYMENTS = [("Billing service", "service"), ("Stripe", "vendor"), ("Postgres", "database"), ("Kafka", "queue"),
            ("Ledger", "service"), ("Fraud checker", "service")]
# Each written on its own (so the placement order, by time written, is fixed): topics of a few facts
# each about payments, which areas then group.
PAYMENT_FACTS = [
    ("Billing service", "Stripe", "charges cards through", "The billing service charges cards through Stripe."),
    ("Billing service", "Postgres", "stores invoices in", "The billing service stores invoices in Postgres."),
    ("Billing service", "Kafka", "publishes to", "The billing service publishes invoice events to Kafka."),
    ("Ledger", "Kafka", "consumes", "The ledger consumes invoice events from Kafka."),
    ("Ledger", "Postgres", "keeps balances in", "The ledger keeps account balances in Postgres."),
    ("Fraud checker", "Stripe", "scores", "The fraud checker scores every Stripe charge before capture."),
    ("Fraud checker", "Ledger", "flags", "The fraud checker flags suspicious ledger entries for review."),
    ("Billing service", "Fraud checker", "calls", "The billing service calls the fraud checker on each charge."),
    ("Stripe", "Kafka", "webhooks land in", "Stripe webhooks land in Kafka as payment events."),
]


async def test_areas_group_topics_and_the_brief_quotes_them_instead(handlers: Handlers) -> None:
    for n, (source, target, relation, text) in enumerate(PAYMENT_FACTS):
        await _write(handlers, PAYMENTS, [_fact(source, target, relation, text)], project="payments")
        await handlers.conn.execute("UPDATE facts SET written_at = now() - make_interval(days => %s) WHERE text = %s",
                                    (len(PAYMENT_FACTS) - n, text))
    await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    digests = await (await handlers.conn.execute(
        "SELECT id::text, kind, subject_id::text, member_ids::text[], parts::text[] FROM digests "
        "WHERE valid_to IS NULL")).fetchall()
    topics = {subject: set(members) for _, kind, subject, members, _ in digests if kind == "topic"}
    areas = [(id_, set(members), parts) for id_, kind, _, members, parts in digests if kind == "area"]
    assert areas, "no area was built"
    held = [part for _, _, parts in areas for part in parts]
    assert len(held) == len(set(held))  # a topic sits in one area at most
    for _, members, parts in areas:
        assert len(parts) >= 2 and set(parts) <= set(topics)
        assert members == set().union(*(topics[part] for part in parts))

    topic_rows = {subject: id_ for id_, kind, subject, _, _ in digests if kind == "topic"}
    for project in (None, "payments"):  # the project's digests are read by another statement
        brief = await handlers.call(_writer(handlers), "consolidation", "brief", {"max_tokens": 8000, "project": project})
        quoted = {item["digest_id"] for item in brief["items"]}
        assert {id_ for id_, _, _ in areas} <= quoted and brief["items"][0]["kind"] == "area"
        assert not {topic_rows[part] for part in held} & quoted
        assert brief["digests_available"] == len(digests) - len(held) == len(brief["items"])

    # Erasing a member fact takes every digest holding it, the area included.
    area_id, members, _ = areas[0]
    fact_id = sorted(members)[0]
    await handlers.admin_call("writes", "forget", {"fact_id": fact_id, "confirm": True, "reason": "request"})
    left = await (await handlers.conn.execute(
        "SELECT count(*) FROM digests WHERE id = %s::uuid OR %s::uuid = ANY(member_ids)", (area_id, fact_id))).fetchone()
    assert left == (0,)
