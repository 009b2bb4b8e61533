"""`forget` on the database: every table is searched for the erased text byte for byte afterwards.

Handler tier: the writes, retrieval and audit routes on one rolled-back transaction (no bus needed;
the event stream and VACUUM are in test_forget_stack.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from forget_helpers import content_hash, episode, fact, marker_hits, new_marker

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import EchoError, InvalidArgument, NotFound, ScopeDenied
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.writes.forget import turn_hash

LEXICAL_RECOMPUTED = """
SELECT 'facts', count(*), coalesce(sum(tsv_length), 0) FROM facts WHERE scope_id = %(s)s
UNION ALL
SELECT 'episodes', count(*), coalesce(sum(tsv_length), 0) FROM episodes WHERE scope_id = %(s)s AND kind <> 'write'
"""
LEXICAL_STORED = "SELECT corpus, doc_count, total_length FROM lexical_stats WHERE scope_id = %(s)s"
DF_RECOMPUTED = """
SELECT 'facts', u.lexeme, count(*) FROM facts f, unnest(f.tsv) u WHERE f.scope_id = %(s)s GROUP BY u.lexeme
UNION ALL
SELECT 'episodes', u.lexeme, count(*) FROM episodes e, unnest(e.tsv) u WHERE e.scope_id = %(s)s AND e.kind <> 'write'
GROUP BY u.lexeme
"""
DF_STORED = "SELECT corpus, term, df FROM lexical_df WHERE scope_id = %(s)s"


def agent(org: str, name: str = "claude-code") -> Caller:
    return Caller(org=org, agent_id=name, read_scopes=["*"], write_scopes=["*"], tool="pytest")


async def rows(handlers: Handlers, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    return await (await handlers.conn.execute(query, params)).fetchall()


async def assert_lexical_exact(handlers: Handlers, scope: str = "shared") -> None:
    """The trigger-kept statistics equal the ones computed from scratch: nothing left stale."""
    s = (await rows(handlers, "SELECT id FROM scopes WHERE name = %s", (scope,)))[0][0]
    stored = {(r[0]): (r[1], r[2]) for r in await rows(handlers, LEXICAL_STORED, {"s": s})}
    fresh = {(r[0]): (r[1], r[2]) for r in await rows(handlers, LEXICAL_RECOMPUTED, {"s": s})}
    assert {k: v for k, v in stored.items() if v != (0, 0)} == {k: v for k, v in fresh.items() if v != (0, 0)}
    assert set(await rows(handlers, DF_STORED, {"s": s})) == set(await rows(handlers, DF_RECOMPUTED, {"s": s}))


async def seed(handlers: Handlers, marker: str) -> dict[str, Any]:
    """A fact holding `marker` with a later version, beside an unrelated fact of the same write; a turn,
    a document, a read, a recall save and an idempotent write that all hold it or name it."""
    who = agent(handlers.org)
    text1 = f"Dana Whitlock lives at {marker} Harbour Road."
    first = await handlers.call(who, "writes", "write_episode", episode(
        [("Dana Whitlock", "person"), ("Home address", "place"), ("Billing API", "service"), ("Postgres", "database")],
        [fact("Dana Whitlock", "Home address", "lives at", text1),
         fact("Billing API", "Postgres", "stores data in", "The billing API stores data in Postgres.")],
        idempotency_key="k-1"))
    assert first["stored"], first
    second = await handlers.call(who, "writes", "write_episode", episode(
        [("Dana Whitlock", "person"), ("Home address", "place")],
        [fact("Dana Whitlock", "Home address", "lives at", f"Dana Whitlock moved to {marker} Quay Street.")]))
    fact_id = second["edges_created"][0]["fact_id"]
    await handlers.admin_call("writes", "import_episodes", {"episodes": [
        {"content": f"user: where does Dana live? assistant: {text1}", "session_id": "chat-1", "seq": 0,
         "source": "claude-code", "external_id": "claude-code:conv-1:m-1"},
        {"content": "user: which database does billing use? assistant: Postgres.", "session_id": "chat-1", "seq": 1},
    ]})
    await handlers.admin_call("writes", "register_documents", {"project": "crm", "documents": [
        {"path": "people.md", "content": f"# People\n{text1}\n"}, {"path": "other.md", "content": "# Other\nnothing\n"}]})
    read = await handlers.call(who, "retrieval", "query_memory", {"query": f"where does Dana live {marker}?"})
    hit = next(r for r in read["results"] if r.get("id") == fact_id)
    await handlers.call(who, "writes", "record_recall_save",
                        {"fact_id": hit["id"], "read_id": read["read_id"], "note": f"found {marker} for the courier"})
    hits = await marker_hits(handlers.conn, marker)
    # The marker really is in every place this file claims to clean (else "gone" would prove nothing).
    for place in ("facts.text", "facts.tsv", "episodes.content", "documents.content", "audit_log.reason",
                  "audit_log.after", "reads.query", "recall_saves.note", "lexical_df.term"):
        assert place in hits, (place, hits)
    return {"fact_id": fact_id, "first": first["edges_created"][0]["fact_id"],
            "other": first["edges_created"][1]["fact_id"]}


async def test_fact_erasure_leaves_no_byte_of_it_in_any_table(handlers: Handlers) -> None:
    marker = new_marker()
    ids = await seed(handlers, marker)
    before = await content_hash(handlers.conn)

    dry = await handlers.admin_call("writes", "forget", {"fact_id": ids["fact_id"]})
    assert dry["dry_run"] is True and dry["erasure_id"] is None
    assert sorted(dry["ids"]["facts"]) == sorted([ids["fact_id"], ids["first"]])  # every version of the triple
    assert dry["counts"]["facts"] == 2 and dry["counts"]["documents"] == 1 and dry["counts"]["recall_saves"] == 1
    assert dry["counts"]["episodes_rewritten"] == 1  # the first write also carried the billing fact
    # The imported turn is named in the log by its origin's digest only, so the log holds no text.
    assert dry["ids"]["turn_hashes"] == [turn_hash("claude-code", "claude-code:conv-1:m-1")]
    assert await content_hash(handlers.conn) == before  # a dry run changes nothing

    done = await handlers.admin_call("writes", "forget", {
        "fact_id": ids["fact_id"], "confirm": True, "reason": "data subject request", "ref": "DSR-17", "by": "dpo"})
    assert done["dry_run"] is False and done["erasure_id"]
    assert done["counts"] == dry["counts"]
    assert done["graph_mirror"] == "no graph mirror (the database has no AGE)"  # the embedded database
    assert await marker_hits(handlers.conn, marker) == {}

    # What was not erased is still there, and still found.
    assert await rows(handlers, "SELECT text FROM facts WHERE id = %s", (ids["other"],)) == [
        ("The billing API stores data in Postgres.",)]
    assert await rows(handlers, "SELECT content FROM episodes WHERE kind = 'write'") == [
        ("The billing API stores data in Postgres.",)]
    await assert_lexical_exact(handlers)
    # The audit rows stay as tombstones: id, time, kind and actor kept, texts replaced by the reason.
    tomb = await rows(handlers, "SELECT kind, agent_id, reason, before FROM audit_log WHERE after->>'erasure_id' = %s",
                      (done["erasure_id"],))
    assert {t[0] for t in tomb} >= {"fact_created", "fact_superseded", "recall_saved"}
    assert all(t[1] == "claude-code" and "data subject request" in t[2] and t[3] is None for t in tomb)

    log = await handlers.admin_call("writes", "forget_log", {})
    entry = log["erasures"][0]
    assert (entry["id"], entry["erased_by"], entry["reason"], entry["ref"], entry["target_kind"]) == (
        done["erasure_id"], "dpo", "data subject request", "DSR-17", "fact")
    assert entry["counts"]["facts"] == 2
    assert marker not in str(log)


async def test_entity_erasure_takes_its_aliases_and_every_fact_touching_it(handlers: Handlers) -> None:
    marker = new_marker()
    name = f"Zorblax {marker}"
    who = agent(handlers.org)
    result = await handlers.call(who, "writes", "write_episode", episode(
        [{"name": name, "type": "person", "aliases": [f"Zed {marker}"]}, ("Acme", "company"), ("Berlin", "city"),
         ("Billing API", "service"), ("Postgres", "database")],
        [fact(name, "Acme", "works at", "The person works at Acme."),
         fact("Berlin", name, "is home of", "Berlin is where the person lives."),
         fact("Billing API", "Postgres", "stores data in", "The billing API stores data in Postgres.")]))
    assert result["stored"], result
    await handlers.admin_call("writes", "import_episodes", {"episodes": [
        {"content": f"user: who is {name.upper()}? assistant: a customer.", "session_id": "chat-2", "seq": 0}]})
    await handlers.admin_call("writes", "register_documents", {"project": "crm", "documents": [
        {"path": "customers.md", "content": f"# Customers\n- {name}\n"}]})
    assert "entities.name" in await marker_hits(handlers.conn, marker)
    assert "entity_aliases.alias" in await marker_hits(handlers.conn, marker)

    dry = await handlers.admin_call("writes", "forget", {"entity": f"zed {marker}"})  # an alias, any case
    assert dry["counts"]["facts"] == 2 and dry["counts"]["entities"] == 1 and dry["counts"]["entity_aliases"] == 1
    assert dry["counts"]["episodes"] == 1 and dry["counts"]["documents"] == 1  # the turn naming it
    assert dry["counts"]["episodes_rewritten"] == 1  # the write also carried the billing fact
    await handlers.admin_call("writes", "forget", {"entity": name, "confirm": True, "reason": "erasure request"})
    assert await marker_hits(handlers.conn, marker) == {}
    assert await rows(handlers, "SELECT count(*) FROM facts") == [(1,)]
    assert await rows(handlers, "SELECT count(*) FROM entities WHERE name IN ('Acme', 'Berlin', 'Postgres')") == [(3,)]
    await assert_lexical_exact(handlers)
    # The store still works for everyone else: the write path and retrieval are untouched.
    answer = await handlers.call(who, "retrieval", "query_memory", {"query": "where does billing store data?"})
    assert any("Postgres" in r.get("text", "") for r in answer["results"])


async def test_scope_erasure_empties_the_scope_and_nothing_else(handlers: Handlers) -> None:
    marker = new_marker()
    who = agent(handlers.org)
    await handlers.admin_call("writes", "scope_create", {"name": "team-x"})
    await handlers.call(who, "writes", "write_episode", episode(
        [("Vault", "service"), ("Runbook", "document")],
        [fact("Vault", "Runbook", "is described in", f"Vault is described in runbook {marker} of team X.")], scope="team-x"))
    await handlers.admin_call("writes", "import_episodes", {"scope": "team-x", "episodes": [
        {"content": f"the vault runbook is {marker} of team X", "session_id": "x", "seq": 0}]})
    await handlers.call(who, "writes", "write_episode", episode(
        [("Billing API", "service"), ("Postgres", "database")],
        [fact("Billing API", "Postgres", "stores data in", "The billing API stores data in Postgres.")]))
    await handlers.admin_call("writes", "forget", {"scope": "team-x", "confirm": True, "reason": "team dissolved"})
    assert await marker_hits(handlers.conn, marker) == {}
    team = (await rows(handlers, "SELECT id FROM scopes WHERE name = 'team-x'"))[0][0]
    for table in ("facts", "entities", "episodes", "entity_aliases"):
        assert await rows(handlers, f"SELECT count(*) FROM {table} WHERE scope_id = %s", (team,)) == [(0,)]
    assert await rows(handlers, "SELECT count(*) FROM facts") == [(1,)]
    await assert_lexical_exact(handlers, "team-x")
    await assert_lexical_exact(handlers, "shared")


async def test_search_lists_candidates_and_erases_nothing(handlers: Handlers) -> None:
    marker = new_marker()
    ids = await seed(handlers, marker)
    before = await content_hash(handlers.conn)
    found = await handlers.admin_call("writes", "forget", {"search": marker})
    assert {c["id"] for c in found["candidates"] if c["kind"] == "fact"} == {ids["fact_id"], ids["first"]}
    assert found["dry_run"] is True and found["counts"] == {}
    assert await content_hash(handlers.conn) == before


BAD = [
    ({"fact_id": "00000000-0000-0000-0000-000000000000", "confirm": True, "reason": "r"}, NotFound),
    ({"fact_id": "not-a-uuid", "confirm": True, "reason": "r"}, InvalidArgument),
    ({"entity": "", "confirm": True, "reason": "r"}, InvalidArgument),
    ({"entity": "   ", "confirm": True, "reason": "r"}, InvalidArgument),
    ({"entity": "Nobody Known", "confirm": True, "reason": "r"}, NotFound),
    ({"scope": "no-such-scope", "confirm": True, "reason": "r"}, NotFound),
    ({"confirm": True, "reason": "r"}, InvalidArgument),
    ({"entity": "Dana Whitlock", "scope": "shared", "confirm": True, "reason": "r"}, InvalidArgument),
    ({"entity": "Dana Whitlock", "confirm": True}, InvalidArgument),  # no reason
    ({"search": "ab"}, InvalidArgument),
    ({"entity": "Dana Whitlock", "confirm": True, "reason": "r", "colour": "red"}, InvalidArgument),
]


@pytest.mark.parametrize(("args", "error"), BAD)
async def test_bad_input_is_a_typed_error_and_changes_nothing(
    handlers: Handlers, args: dict[str, Any], error: type[EchoError]
) -> None:
    marker = new_marker()
    await seed(handlers, marker)
    before = await content_hash(handlers.conn)
    with pytest.raises(error) as raised:
        await handlers.admin_call("writes", "forget", args)
    assert raised.value.message
    assert await content_hash(handlers.conn) == before


async def test_only_the_admin_may_erase(handlers: Handlers) -> None:
    marker = new_marker()
    ids = await seed(handlers, marker)
    before = await content_hash(handlers.conn)
    for verb, args in (("forget", {"fact_id": ids["fact_id"], "confirm": True, "reason": "r"}),
                       ("forget_log", {})):
        with pytest.raises(ScopeDenied):
            await handlers.call(agent(handlers.org, "ci-bot"), "writes", verb, args)
    assert await content_hash(handlers.conn) == before


async def test_an_erased_turn_is_not_imported_again(handlers: Handlers) -> None:
    marker = new_marker()
    ids = await seed(handlers, marker)
    await handlers.admin_call("writes", "forget", {"fact_id": ids["fact_id"], "confirm": True, "reason": "request"})
    assert await marker_hits(handlers.conn, marker) == {}
    # `echo-memory import --watch` reads the agent's history file again: the same turn, the same origin.
    again = await handlers.admin_call("writes", "import_episodes", {"episodes": [
        {"content": f"user: where does Dana live? assistant: Dana Whitlock lives at {marker} Harbour Road.",
         "session_id": "chat-1", "seq": 0, "source": "claude-code", "external_id": "claude-code:conv-1:m-1"},
        {"content": "user: and the weather? assistant: sunny.", "session_id": "chat-1", "seq": 2,
         "source": "claude-code", "external_id": "claude-code:conv-1:m-3"}]})
    assert (again["imported"], again["erased"], again["already"]) == (1, 1, 0)
    assert again["episode_ids"][0] == "" and again["episode_ids"][1]
    assert await marker_hits(handlers.conn, marker) == {}


async def test_erased_document_content_is_not_registered_again(handlers: Handlers) -> None:
    marker = new_marker()
    ids = await seed(handlers, marker)
    await handlers.admin_call("writes", "forget", {"fact_id": ids["fact_id"], "confirm": True, "reason": "request"})
    # `docs sync` reads the unchanged file again; once edited, it is registered as usual.
    again = await handlers.admin_call("writes", "register_documents", {"project": "crm", "documents": [
        {"path": "people.md", "content": f"# People\nDana Whitlock lives at {marker} Harbour Road.\n"},
        {"path": "people-2.md", "content": "# People\nnobody\n"}]})
    assert [d["status"] for d in again["documents"]] == ["refused", "new"]
    assert "erased" in again["documents"][0]["reason"]
    assert await marker_hits(handlers.conn, marker) == {}


async def test_a_name_matches_whole_words_only(handlers: Handlers) -> None:
    who = agent(handlers.org)
    await handlers.call(who, "writes", "write_episode", episode(
        [("Ann", "person"), ("Acme", "company"), ("Finance", "team"), ("Report", "document")],
        [fact("Ann", "Acme", "works at", "Ann works at Acme."),
         fact("Finance", "Report", "publishes", "Finance publishes the annual report; see ANN-42 and Ann's notes.")]))
    await handlers.admin_call("writes", "import_episodes", {"episodes": [
        {"content": "the annual planning starts in May", "session_id": "p", "seq": 0},
        {"content": "ask ann about the contract", "session_id": "p", "seq": 1}]})
    dry = await handlers.admin_call("writes", "forget", {"entity": "Ann"})
    # Both facts name Ann as a word ("Ann's", "ANN-42"); "annual" does not, so that turn stays.
    assert dry["counts"]["facts"] == 2 and dry["counts"]["episodes"] == 2  # the write episode and "ask ann"
    await handlers.admin_call("writes", "forget", {"entity": "Ann", "confirm": True, "reason": "request"})
    assert await rows(handlers, "SELECT content FROM episodes") == [("the annual planning starts in May",)]


async def test_consolidation_digests_and_tier_moves_go_with_the_facts(handlers: Handlers) -> None:
    marker = new_marker()
    who = agent(handlers.org)
    await handlers.call(who, "writes", "write_episode", episode(
        [("Dana Whitlock", "person"), ("Home address", "place"), ("Acme", "company"), ("Berlin", "city")],
        [fact("Dana Whitlock", "Home address", "lives at", f"Dana Whitlock lives at {marker} Harbour Road."),
         fact("Dana Whitlock", "Acme", "works at", "Dana Whitlock works at Acme."),
         fact("Dana Whitlock", "Berlin", "was born in", "Dana Whitlock was born in Berlin.")]))
    # Old enough for the policy to move it out of the hot tier, so the run records a tier move.
    await handlers.conn.execute("UPDATE facts SET written_at = now() - interval '200 days', "
                                "t_valid = now() - interval '200 days'")
    await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    hits = await marker_hits(handlers.conn, marker)
    assert "digests.summary" in hits, hits  # the digest quotes the fact
    assert (await rows(handlers, "SELECT count(*) FROM tier_moves"))[0][0] > 0
    assert (await rows(handlers, "SELECT count(*) FROM fact_tiers"))[0][0] > 0

    done = await handlers.admin_call("writes", "forget", {"entity": "Dana Whitlock", "confirm": True,
                                                          "reason": "request"})
    assert done["counts"]["digests"] >= 1 and done["counts"]["tier_moves"] >= 1
    assert await marker_hits(handlers.conn, marker) == {}
    assert await rows(handlers, "SELECT count(*) FROM tier_moves") == [(0,)]
    assert await rows(handlers, "SELECT count(*) FROM fact_tiers") == [(0,)]


async def test_erasing_a_merged_entity_takes_the_merge_decision_and_its_reason(handlers: Handlers) -> None:
    marker = new_marker()
    who = agent(handlers.org)
    result = await handlers.call(who, "writes", "write_episode", episode(
        [("Billing API", "service"), (f"Billing gateway {marker}", "service"), ("Postgres", "database")],
        [fact("Billing API", "Postgres", "stores data in", "The billing API stores data in Postgres."),
         fact(f"Billing gateway {marker}", "Postgres", "reads from", "The billing gateway reads from Postgres.")],
        entity_resolutions=[{"mention": f"Billing gateway {marker}", "entity_id": "new"}]))
    assert result["stored"], result
    await handlers.admin_call("writes", "entity_merge", {"keep": "Billing API", "absorb": f"Billing gateway {marker}",
                                                         "reason": f"same service, ticket {marker}"})
    assert "entity_merges.reason" in await marker_hits(handlers.conn, marker)
    await handlers.admin_call("writes", "forget", {"entity": f"Billing gateway {marker}", "confirm": True,
                                                   "reason": "erasure request"})
    assert await marker_hits(handlers.conn, marker) == {}
    assert await rows(handlers, "SELECT count(*) FROM entity_merges") == [(0,)]
