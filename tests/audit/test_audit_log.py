"""get_audit_log as agents call it through the edge: rows for every change, atomic with it; filters; paging; scopes.

On the handler tier, except the time filters: every row of one rolled-back transaction carries the
same `now()`, so that test runs on every service's routes with each request committing.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

from audit_helpers import Writer, fact

from echo_memory.libs.local.stack import tool_error
from echo_memory.libs.testing.agents import Agent, Routes, make_scope
from echo_memory.libs.testing.tiers import Handlers

PG = [("Postgres", "database"), ("Billing API", "service")]


def kinds(page: dict[str, Any]) -> list[str]:
    return [e["kind"] for e in page["entries"]]


async def test_every_write_change_has_its_audit_row_with_agent_session_and_reason(handlers: Handlers) -> None:
    w = Writer(Agent(handlers, "claude-code"))
    first = await w.write(PG, [fact("Billing API", "Postgres", "stores data in", "The billing API stores data in Postgres.")])
    second = await w.write(PG, [fact("Billing API", "Postgres", "stores data in",
                                     "The billing API stores invoices in Postgres 16.")], session="s-2")
    pg_id = None
    log = await w.audit()
    for entry in log["entries"]:
        if entry["kind"] == "entity_created" and entry["after"]["name"] == "Postgres":
            pg_id = entry["entity_id"]
    confirmed = await w.write([("PG cluster", "database"), ("Reports job", "job")],
                              [fact("Reports job", "PG cluster", "reads from", "The reports job reads from the PG cluster.")],
                              session="s-3",
                              entity_resolutions=[{"mention": "PG cluster", "entity_id": pg_id,
                                                   "rationale": "same database, team nickname"}])
    log = await w.audit()
    assert first["stored"] and second["stored"] and confirmed["stored"], confirmed
    entries = log["entries"]
    assert [e["id"] for e in entries] == sorted(e["id"] for e in entries)  # oldest first
    assert [e["created_at"] for e in entries] == sorted(e["created_at"] for e in entries)
    assert {"fact_created", "entity_created", "fact_superseded", "entity_resolved"} <= set(kinds(log))
    created = [e for e in entries if e["kind"] == "fact_created"]
    assert created[0]["fact_id"] == first["edges_created"][0]["fact_id"]
    assert created[0]["agent_id"] == "claude-code" and created[0]["session_id"] == "s-1"
    assert created[0]["scope"] == "shared" and created[0]["reason"]
    superseded = next(e for e in entries if e["kind"] == "fact_superseded")
    assert superseded["before"]["fact_id"] == first["edges_created"][0]["fact_id"]
    assert superseded["before"]["text"] == "The billing API stores data in Postgres."
    assert superseded["after"]["text"] == "The billing API stores invoices in Postgres 16."
    assert superseded["fact_id"] == second["edges_created"][0]["fact_id"] and superseded["session_id"] == "s-2"
    resolved = next(e for e in entries if e["kind"] == "entity_resolved" and e["after"]["how"] == "agent-confirmed")
    assert resolved["entity_id"] == pg_id and resolved["reason"] == "same database, team nickname"


async def test_a_failed_write_leaves_no_audit_row(handlers: Handlers) -> None:
    c = Agent(handlers, "claude-code")
    w = Writer(c)
    await w.write(PG, [fact("Billing API", "Postgres", "uses", "The billing API uses Postgres.")])
    before = await w.audit()
    # A new entity is created (and audited) first, then the unknown entity id fails the call:
    # the transaction must take the entity and its audit row with it.
    refused = await c.call_tool("write_episode", {
        "session_id": "s-9", "entities": [{"name": "Ledger service", "type": "service"}],
        "facts": [fact("Ledger service", "Ghost", "calls", "The ledger service calls Ghost.")],
        "entity_resolutions": [{"mention": "Ghost", "entity_id": "00000000-0000-0000-0000-000000000001"}],
    })
    after = await w.audit()
    trace = await c.call_tool("trace_cause", {"topic": "Ledger service"})
    assert refused.is_error and refused.structured_content["not_stored"] == "refused"
    assert after["entries"] == before["entries"]
    assert trace.structured_content["resolution"] != "exact"  # no entity "Ledger service" survived


async def test_filters_since_until_agent_kind_fact_id_are_inclusive_and_combine(routes: Routes) -> None:
    a, b = Writer(Agent(routes, "claude-code")), Writer(Agent(routes, "cursor"))
    one = await a.write(PG, [fact("Billing API", "Postgres", "uses", "The billing API uses Postgres.")])
    await asyncio.sleep(1.1)
    mid = int(time.time())
    # `until=mid` includes the whole second `mid`, so the second write waits for the next one.
    await asyncio.sleep(mid + 1.05 - time.time())
    two = await b.write(PG, [fact("Billing API", "Postgres", "uses", "The billing API uses Postgres 16.")], session="s-b")
    everything = await a.audit()
    first_row = everything["entries"][0]
    at_first = first_row["created_at"]
    by_cursor = await a.audit(agent="cursor")
    superseded = await a.audit(kind="fact_superseded")
    old_fact = await a.audit(fact_id=one["edges_created"][0]["fact_id"])
    since_mid = await a.audit(since=mid)
    until_mid = await a.audit(until=mid)
    exactly_first = await a.audit(since=at_first, until=at_first)
    as_text_seconds = await a.audit(since=str(mid))
    old_id, new_id = one["edges_created"][0]["fact_id"], two["edges_created"][0]["fact_id"]
    assert {e["agent_id"] for e in by_cursor["entries"]} == {"cursor"}
    assert kinds(superseded) == ["fact_superseded"]
    # Rows about a fact: the one that created it and the one that ended it.
    assert [(e["kind"], e["fact_id"]) for e in old_fact["entries"]] == [("fact_created", old_id), ("fact_superseded", new_id)]
    # Everything since `mid` is cursor's second write (its supersession and how it resolved the entities).
    assert "fact_superseded" in kinds(since_mid) and "fact_created" not in kinds(since_mid)
    assert {e["agent_id"] for e in since_mid["entries"]} == {"cursor"} and since_mid == as_text_seconds
    assert "fact_superseded" not in kinds(until_mid) and "fact_created" in kinds(until_mid)
    assert len(since_mid["entries"]) + len(until_mid["entries"]) == len(everything["entries"])
    # An ISO instant is inclusive at both ends: since == until == a row's time returns that row.
    assert first_row["id"] in [e["id"] for e in exactly_first["entries"]]
    assert all(e["created_at"] == at_first for e in exactly_first["entries"])
    assert datetime.fromisoformat(at_first.replace("Z", "+00:00")).tzinfo is not None


async def test_cursor_pages_cover_everything_once_and_say_when_more_remain(handlers: Handlers) -> None:
    w = Writer(Agent(handlers, "claude-code"))
    for a, b in (("Payments", "Kafka"), ("Search indexer", "Elasticsearch"), ("Mailer", "SMTP relay")):
        written = await w.write([(a, "service"), (b, "infra")], [fact(a, b, "depends on", f"{a} depends on {b}.")])
        assert written["stored"], written
    everything = await w.audit(limit=1000)
    pages, cursor = [], None
    while True:
        page = await w.audit(limit=4, **({"cursor": cursor} if cursor else {}))
        pages.append(page)
        cursor = page["next_cursor"]
        assert page["more"] is (cursor is not None)
        if not page["more"]:
            break
    total = len(everything["entries"])
    assert total == 9 and everything["more"] is False
    assert [len(p["entries"]) for p in pages] == [4, 4, 1]
    assert [e["id"] for p in pages for e in p["entries"]] == [e["id"] for e in everything["entries"]]


async def test_a_caller_sees_only_audit_rows_of_scopes_it_may_read(handlers: Handlers) -> None:
    await make_scope(handlers, "team-a")
    c = Agent(handlers, "claude-code", read=["shared", "solo", "team-a"], write=["shared", "solo", "team-a"])
    d = Agent(handlers, "cursor")
    owner, other = Writer(c), Writer(d)
    await owner.write(PG, [fact("Billing API", "Postgres", "uses", "The billing API uses Postgres.")], scope="team-a")
    await owner.write([("My notes", "doc"), ("Idea", "idea")],
                      [fact("My notes", "Idea", "mention", "My notes mention an idea.")], scope="solo")
    await other.write([("Cache", "service"), ("Redis", "db")],
                      [fact("Cache", "Redis", "runs on", "The cache runs on Redis.")])
    mine = await owner.audit()
    team_only = await owner.audit(scope="team-a")
    solo_only = await owner.audit(scope="solo")
    theirs = await other.audit()
    denied = await d.call_tool("get_audit_log", {"scope": "team-a"})
    their_solo = await other.audit(scope="solo")
    assert {e["scope"] for e in mine["entries"]} == {"team-a", "solo", "shared"}
    assert {e["scope"] for e in team_only["entries"]} == {"team-a"} and team_only["scopes"] == ["team-a"]
    assert {e["scope"] for e in solo_only["entries"]} == {"solo"}
    assert {e["scope"] for e in theirs["entries"]} == {"shared"} and {e["agent_id"] for e in theirs["entries"]} == {"cursor"}
    assert denied.is_error and tool_error(denied)["code"] == "scope_denied"
    assert their_solo["entries"] == []


HOSTILE = [
    ({"since": "yesterday"}, "since"),
    ({"until": "2025-13-45"}, "until"),
    ({"since": 2_000_000_000, "until": 1_000_000_000}, "after until"),
    ({"kind": "fact_deleted"}, "fact_deleted"),
    ({"fact_id": "not-a-uuid"}, "fact_id"),
    ({"cursor": "garbage!!"}, "cursor"),
    ({"limit": 0}, "limit"),
    ({"limit": 100_000}, "limit"),
    ({"since": 10**15}, "since"),
    ({"scope": "solo:cursor"}, "solo:"),
    ({"nonsense": True}, "nonsense"),
]


async def test_bad_filters_are_refused_with_typed_errors(handlers: Handlers) -> None:
    c = Agent(handlers, "claude-code")
    for arguments, fragment in HOSTILE:
        result = await c.call_tool("get_audit_log", arguments)
        assert result.is_error, arguments
        error = tool_error(result)
        assert (error["code"], error["retryable"]) == ("invalid_argument", False), (arguments, error)
        assert fragment in error["message"], (arguments, error)
    missing = await c.call_tool("get_audit_log", {"scope": "team-nope"})
    assert tool_error(missing)["code"] == "scope_denied"
