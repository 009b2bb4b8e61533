"""record_recall_save: only facts a logged read returned can be credited; saves are audited once."""

from __future__ import annotations

from echo_memory.libs.testing.agents import Agent, Routes
from echo_memory.libs.testing.tiers import Handlers
from tests.writes.conftest import PAYMENTS, call, counts, episode, fact, sql

OTHER = episode([("Alice", "person"), ("Billing", "team")],
                [fact("Alice", "Billing", "leads", "Alice leads the billing team.")])


async def _write_and_read(client, query: str = "how are cards charged?") -> tuple[str, str]:  # type: ignore[no-untyped-def]
    _, written = await call(client, "write_episode", PAYMENTS)
    _, read = await call(client, "query_memory", {"query": query})
    fact_id = written["edges_created"][0]["fact_id"]
    assert fact_id in [r["id"] for r in read["results"]]
    return fact_id, read["read_id"]


async def test_a_fact_a_read_returned_is_saved_once_with_agent_audit_and_event(handlers: Handlers) -> None:
    client = Agent(handlers, "claude-code")
    fact_id, read_id = await _write_and_read(client)
    is_error, saved = await call(client, "record_recall_save",
                                 {"fact_id": fact_id, "read_id": read_id, "note": "saved re-asking about Stripe"})
    _, again = await call(client, "record_recall_save",
                          {"fact_id": fact_id, "read_id": read_id, "note": "saved re-asking about Stripe"})
    assert not is_error
    assert saved == {"save_id": saved["save_id"], "fact_id": fact_id, "read_id": read_id, "already": False}
    assert again == {**saved, "already": True}
    rows = await sql(handlers.conn, "SELECT fact_id::text, read_id::text, agent_id, note, created_at IS NOT NULL "
                                         "FROM recall_saves")
    assert rows == [(fact_id, read_id, "claude-code", "saved re-asking about Stripe", True)]
    audits = await sql(handlers.conn, "SELECT fact_id::text, agent_id, after->>'save_id' FROM audit_log "
                                           "WHERE kind = 'recall_saved'")
    assert audits == [(fact_id, "claude-code", saved["save_id"])]
    events = await sql(handlers.conn, "SELECT payload->>'save_id' FROM outbox WHERE kind = 'recall.saved'")
    assert events == [(saved["save_id"],)]


async def test_without_a_read_id_the_latest_read_that_returned_it_is_credited(routes: Routes) -> None:
    # "Latest" is by the read's time: each request commits at its own (in-memory broker tier), where
    # one rolled-back transaction would give both reads the same now() and leave the tie to the ids.
    client = Agent(routes, "claude-code")
    fact_id, _ = await _write_and_read(client)
    _, second_read = await call(client, "query_memory", {"query": "which payment provider do we use?"})
    _, saved = await call(client, "record_recall_save", {"fact_id": fact_id, "note": "helped"})
    assert saved["read_id"] == second_read["read_id"]


async def test_refusals_are_typed_not_retryable_and_store_nothing(handlers: Handlers) -> None:
    client = Agent(handlers, "claude-code")
    fact_id, read_id = await _write_and_read(client)
    _, other = await call(client, "write_episode", OTHER)
    unread = other["edges_created"][0]["fact_id"]
    _, other_read = await call(client, "query_memory", {"about": ["Alice"]})
    assert [r["id"] for r in other_read["results"]] == [unread]
    before = await counts(handlers.conn)
    cases = {
        # "unread" was returned once (by about=[Alice]): it can be credited only through that read.
        "another read than the one that returned it": ({"fact_id": unread, "read_id": read_id, "note": "n"},
                                                       "invalid_argument", "did not return fact"),
        "that read did not return it": ({"fact_id": fact_id, "read_id": other_read["read_id"], "note": "n"},
                                        "invalid_argument", "did not return fact"),
        "unknown fact": ({"fact_id": "00000000-0000-0000-0000-00000000000f", "note": "n"}, "not_found", "does not exist"),
        "unknown read": ({"fact_id": fact_id, "read_id": "00000000-0000-0000-0000-00000000000e", "note": "n"},
                         "not_found", "read 00000000"),
        "malformed id": ({"fact_id": "fact-1", "note": "n"}, "invalid_argument", "not an id"),
        "secret in the note": ({"fact_id": fact_id, "read_id": read_id, "note": "token=ghp_" + "x1" * 20},
                               "invalid_argument", "a GitHub token"),
        "unknown field": ({"fact_id": fact_id, "note": "n", "score": 1}, "invalid_argument", "score"),
        "empty note": ({"fact_id": fact_id, "note": ""}, "invalid_argument", "note"),
    }
    problems = []
    for name, (args, code, fragment) in cases.items():
        is_error, result = await call(client, "record_recall_save", args)
        error = result.get("error") or {}
        if not (is_error and error.get("code") == code and error.get("retryable") is False
                and fragment in error.get("message", "")):
            problems.append((name, result))
    assert problems == []
    assert await counts(handlers.conn) == before


async def test_a_fact_no_read_ever_returned_is_refused(handlers: Handlers) -> None:
    client = Agent(handlers, "claude-code")
    _, written = await call(client, "write_episode", PAYMENTS)
    is_error, result = await call(client, "record_recall_save",
                                  {"fact_id": written["edges_created"][0]["fact_id"], "note": "n"})
    assert is_error and result["error"]["code"] == "invalid_argument" and result["error"]["retryable"] is False
    assert "no logged read returned fact" in result["error"]["message"]
    assert (await counts(handlers.conn))["recall_saves"] == 0


async def test_another_agents_solo_fact_is_not_found_even_after_its_owner_read_it(handlers: Handlers) -> None:
    owner = Agent(handlers, "claude-code")
    _, written = await call(owner, "write_episode", {**PAYMENTS, "scope": "solo"})
    await call(owner, "query_memory", {"query": "cards", "scope": "solo"})
    fact_id = written["edges_created"][0]["fact_id"]
    other = Agent(handlers, "cursor")
    is_error, result = await call(other, "record_recall_save", {"fact_id": fact_id, "note": "n"})
    assert is_error and result["error"]["code"] == "not_found"
    assert (await counts(handlers.conn))["recall_saves"] == 0
