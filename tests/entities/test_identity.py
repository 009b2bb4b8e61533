"""A person fixes entity identity: merge, unmerge, rename and the deferred list, on the handler tier.

The store is built through the real write path (write_episode's handler, the real model and
Postgres); every answer compared is the service's own structured result.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.testing.tiers import Handlers

AGENT = "claude-code"
A, B = "Checkout service", "Storefront backend"
ENTITIES = [(A, "service"), (B, "service"), ("Postgres", "database"), ("Stripe", "vendor"),
            ("Connection pool change", "change"), ("Checkout errors", "incident")]
FACTS = [
    (A, "Postgres", "stores orders in", "The checkout service stores orders in Postgres.", None),
    (B, "Stripe", "charges cards through", "The storefront backend charges cards through Stripe.", None),
    ("Connection pool change", B, "slowed", "The connection pool change slowed the storefront backend.", "led_to"),
    (A, "Checkout errors", "caused", "Slow checkout service requests led to checkout errors.", "led_to"),
]
# Every table a merge, unmerge or rename may touch, and those it must never touch.
COUNTED = ("facts", "entities", "entity_aliases", "entity_merges", "audit_log", "episodes")


def agent(handlers: Handlers, name: str = AGENT) -> Caller:
    return Caller(org=handlers.org, agent_id=name, read_scopes=["shared"], write_scopes=["shared"], tool="pytest")


async def write(handlers: Handlers, entities: list[tuple[str, str]], facts: list[tuple[Any, ...]],
                session: str = "s-1", **extra: Any) -> dict[str, Any]:
    body = {
        "session_id": session, "project": "shop",
        "entities": [{"name": n, "type": t} for n, t in entities],
        "facts": [{"source": s, "target": t, "relation": r, "fact": text, "confidence": "extracted",
                   **({"causal_hint": hint} if hint else {})} for s, t, r, text, hint in facts],
        **extra,
    }
    return await handlers.call(agent(handlers), "writes", "write_episode", body)


async def build(handlers: Handlers) -> dict[str, str]:
    """The store: one write per fact, so every fact has its own episode and audit rows. Fact ids by source."""
    ids = {}
    for i, f in enumerate(FACTS):
        names = {f[0], f[1]}
        written = await write(handlers, [e for e in ENTITIES if e[0] in names], [f], session=f"s-{i}")
        assert written["stored"], written
        ids[f"{f[0]}->{f[1]}"] = written["edges_created"][0]["fact_id"]
    return ids


async def counts(handlers: Handlers) -> dict[str, int]:
    out = {}
    for table in COUNTED:
        row = await (await handlers.conn.execute(f"SELECT count(*) FROM {table}")).fetchone()  # noqa: S608 - fixed names
        assert row is not None
        out[table] = int(row[0])
    return out


async def snapshot_tables(handlers: Handlers) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of facts, entities and aliases as stored, to prove a merge edits none of them."""
    out = {}
    for table, order in (("facts", "id"), ("entities", "id"), ("entity_aliases", "entity_id, alias")):
        cur = await handlers.conn.execute(f"SELECT * FROM {table} ORDER BY {order}")  # noqa: S608 - fixed names
        out[table] = [tuple(str(v) for v in row) for row in await cur.fetchall()]
    return out


async def query(handlers: Handlers, **args: Any) -> dict[str, Any]:
    return await handlers.call(agent(handlers), "retrieval", "query_memory", args)


async def trace(handlers: Handlers, topic: str) -> dict[str, Any]:
    return await handlers.call(agent(handlers), "causal", "trace_cause", {"topic": topic})


async def why(handlers: Handlers, fact_id: str) -> dict[str, Any]:
    return await handlers.admin_call("audit", "why", {"fact_id": fact_id})


def without_read_id(answer: dict[str, Any]) -> dict[str, Any]:
    """A query_memory answer minus the id of its own read-log row (new on every call by design)."""
    out = copy.deepcopy(answer)
    out.pop("read_id")
    return out


def without_identity(trail: dict[str, Any], reads_made: set[str]) -> dict[str, Any]:
    """A why answer minus the identity history and the reads this test itself made in between."""
    out = copy.deepcopy(trail)
    for entity in out["entities"]:
        entity.pop("identity")
    out["reads"] = [r for r in out["reads"] if r["read_id"] not in reads_made]
    return out


async def test_merge_then_unmerge_returns_why_query_memory_and_trace_cause_to_exactly_what_they_were(
    handlers: Handlers,
) -> None:
    ids = await build(handlers)
    b_fact, a_fact = ids[f"{B}->Stripe"], ids[f"{A}->Postgres"]
    causal_fact = ids[f"Connection pool change->{B}"]
    asked = [{"about": [A]}, {"about": [B]}, {"query": "how are cards charged at checkout?"},
             {"about": [A, "Stripe"]}]
    before_query = [without_read_id(await query(handlers, **a)) for a in asked]
    before_trace = [await trace(handlers, t) for t in ("Checkout errors", A, "Connection pool change")]
    before_why = {f: await why(handlers, f) for f in (b_fact, a_fact, causal_fact)}
    before_tables = await snapshot_tables(handlers)

    merged = await handlers.admin_call("writes", "entity_merge", {"keep": A, "absorb": B, "reason": "same service"})
    assert merged["surviving"]["name"] == A and merged["absorbed"]["name"] == B
    assert merged["facts_following"] == 2  # B's own fact and the causal fact that names it

    # While merged: about A returns B's facts, the causal chain runs through A, why shows the merge.
    reads_made = set()
    during = await query(handlers, about=[A])
    reads_made.add(during["read_id"])
    assert {r["id"] for r in during["results"]} == {a_fact, b_fact, causal_fact, ids[f"{A}->Checkout errors"]}
    pair = await query(handlers, about=[A, "Stripe"])
    reads_made.add(pair["read_id"])
    assert [r["id"] for r in pair["results"]] == [b_fact]
    assert before_query[3]["results"] == []  # before the merge A and Stripe were not connected
    chained = await trace(handlers, "Checkout errors")
    assert chained["chains"] != before_trace[0]["chains"]
    assert [[s["from"] for s in c["steps"]] for c in chained["chains"]] == [["Connection pool change", A]]
    trail = await why(handlers, b_fact)
    source = next(e for e in trail["entities"] if e["role"] == "source")
    assert source["merged_into"] == merged["surviving"]["entity_id"]
    assert [e["kind"] for e in source["identity"]] == ["entity_merged"]
    assert await snapshot_tables(handlers) == before_tables  # no fact, entity or alias was edited

    undone = await handlers.admin_call("writes", "entity_unmerge", {"entity": A, "alias": B})
    assert undone["merge_id"] == merged["merge_id"] and undone["restored"]["name"] == B
    assert undone["facts_returned"] == 2

    assert await snapshot_tables(handlers) == before_tables
    for fact_id, earlier in before_why.items():
        now = await why(handlers, fact_id)
        assert without_identity(now, reads_made) == without_identity(earlier, set()), fact_id
    history = next(e for e in (await why(handlers, b_fact))["entities"] if e["role"] == "source")["identity"]
    assert [(e["kind"], e["after"]["surviving"]) for e in history] == [("entity_merged", A), ("entity_unmerged", A)]
    assert [without_read_id(await query(handlers, **a)) for a in asked] == before_query
    assert [await trace(handlers, t) for t in ("Checkout errors", A, "Connection pool change")] == before_trace


async def test_after_a_merge_new_writes_naming_the_alias_resolve_to_the_surviving_entity(handlers: Handlers) -> None:
    ids = await build(handlers)
    merged = await handlers.admin_call("writes", "entity_merge", {"keep": A, "absorb": B})
    written = await write(handlers, [(B, "service"), ("Redis", "database")],
                          [(B, "Redis", "caches sessions in", "The storefront backend caches sessions in Redis.", None)],
                          session="s-after")
    assert written["stored"], written
    edge = written["edges_created"][0]
    assert edge["source"] == A  # the write named B; B answers as A now
    row = await (await handlers.conn.execute("SELECT source_entity FROM facts WHERE id = %s",
                                             (edge["fact_id"],))).fetchone()
    assert row is not None and str(row[0]) == merged["surviving"]["entity_id"]
    # The alias was not learned as a second name row: B stays its own entity, redirected.
    aliases = await (await handlers.conn.execute(
        "SELECT alias FROM entity_aliases WHERE entity_id = %s", (merged["surviving"]["entity_id"],))).fetchall()
    assert (B,) not in aliases
    # A look-alike of B is offered A (B's name as the matched alias), never B's absorbed id; and an
    # agent that answers with B's id is resolved to A.
    typo = await write(handlers, [("Storefront backnd", "service"), ("Kafka", "queue")],
                       [("Storefront backnd", "Kafka", "publishes to", "Storefront backnd publishes to Kafka.", None)],
                       session="s-typo")
    offered = typo["deferred"][0]["candidates"]
    assert [(c["entity_id"], c["name"], c["matched_name"]) for c in offered][:1] == [
        (merged["surviving"]["entity_id"], A, B)]
    assert merged["absorbed"]["entity_id"] not in {c["entity_id"] for c in offered}
    confirmed = await write(handlers, [("Storefront backnd", "service"), ("Kafka", "queue")],
                            [("Storefront backnd", "Kafka", "publishes to", "Storefront backnd publishes to Kafka.",
                              None)], session="s-typo",
                            entity_resolutions=[{"mention": "Storefront backnd",
                                                 "entity_id": merged["absorbed"]["entity_id"]}])
    assert confirmed["edges_created"][0]["source"] == A, confirmed
    # Unmerging gives B back its own facts; the ones written after the merge stay with A.
    await handlers.admin_call("writes", "entity_unmerge", {"entity": A, "alias": B})
    about_b = {r["id"] for r in (await query(handlers, about=[B]))["results"]}
    assert about_b == {ids[f"{B}->Stripe"], ids[f"Connection pool change->{B}"]}
    about_a = {r["id"] for r in (await query(handlers, about=[A]))["results"]}
    assert edge["fact_id"] in about_a


async def test_rename_keeps_the_old_name_as_an_alias_and_renaming_back_restores_it(handlers: Handlers) -> None:
    ids = await build(handlers)
    tables = await snapshot_tables(handlers)
    renamed = await handlers.admin_call("writes", "entity_rename", {"entity": A, "new_name": "Checkout API"})
    assert renamed["entity"]["name"] == "Checkout API" and renamed["old_name"] == A
    assert renamed["aliases"] == [A]
    # The old name still resolves: about, trace and a new write naming it reach the same entity.
    about_old = {r["id"] for r in (await query(handlers, about=[A]))["results"]}
    assert ids[f"{A}->Postgres"] in about_old
    written = await write(handlers, [(A, "service"), ("Kafka", "queue")],
                          [(A, "Kafka", "publishes to", "The checkout service publishes orders to Kafka.", None)])
    assert written["edges_created"][0]["source"] == "Checkout API"
    trail = await why(handlers, ids[f"{A}->Postgres"])
    source = next(e for e in trail["entities"] if e["role"] == "source")
    assert source["name"] == "Checkout API"
    assert [(e["kind"], e["before"]["name"], e["after"]["name"]) for e in source["identity"]] == [
        ("entity_renamed", A, "Checkout API")]

    # A second rename is a new name: the name it leaves stays an alias too.
    again = await handlers.admin_call("writes", "entity_rename", {"entity": "Checkout API", "new_name": "Checkout"})
    assert sorted(again["aliases"]) == sorted([A, "Checkout API"])
    # Renaming back, step by step, undoes each rename exactly: name and alias rows as they were.
    await handlers.admin_call("writes", "entity_rename", {"entity": "Checkout", "new_name": "Checkout API"})
    back = await handlers.admin_call("writes", "entity_rename", {"entity": "Checkout API", "new_name": A})
    assert back["entity"]["name"] == A and back["aliases"] == []
    after = await snapshot_tables(handlers)
    written_since = {f["fact_id"] for f in written["edges_created"]}
    assert [r for r in after["facts"] if r[0] not in written_since] == tables["facts"]
    assert [r for r in after["entities"] if r[2] != "Kafka"] == tables["entities"]
    assert after["entity_aliases"] == tables["entity_aliases"]
    history = [e for e in (await why(handlers, ids[f"{A}->Postgres"]))["entities"] if e["role"] == "source"][0]
    assert [(e["after"]["name"], e["after"]["undid_last_rename"]) for e in history["identity"]] == [
        ("Checkout API", False), ("Checkout", False), ("Checkout API", True), (A, True)]


async def test_deferred_look_alikes_are_listed_with_their_candidates_and_scores(handlers: Handlers) -> None:
    await build(handlers)
    empty = await handlers.admin_call("writes", "entity_deferred", {})
    assert empty["deferred"] == []
    # A typo of "Checkout service" is not resolved silently: it is deferred for the agent.
    deferred = await write(handlers, [("Checkout servce", "service"), ("Postgres", "database")],
                           [("Checkout servce", "Postgres", "reads from", "Checkout servce reads from Postgres.", None)],
                           session="s-lookalike")
    assert deferred["deferred"], deferred
    listed = await handlers.admin_call("writes", "entity_deferred", {"scope": "shared"})
    assert [(d["mention"], d["agent_id"], d["scope"], d["times"]) for d in listed["deferred"]] == [
        ("Checkout servce", AGENT, "shared", 1)]
    candidates = listed["deferred"][0]["candidates"]
    assert candidates == deferred["deferred"][0]["candidates"]
    assert candidates[0]["name"] == A and 0 < candidates[0]["score"] <= 1
    # Answered by the agent: no longer waiting.
    await write(handlers, [("Checkout servce", "service"), ("Postgres", "database")],
                [("Checkout servce", "Postgres", "reads from", "Checkout servce reads from Postgres.", None)],
                session="s-answer", entity_resolutions=[{"mention": "Checkout servce", "entity_id": "new"}])
    assert (await handlers.admin_call("writes", "entity_deferred", {}))["deferred"] == []


async def test_calibrate_counts_a_persons_merges_and_unmerges(handlers: Handlers) -> None:
    await build(handlers)
    await handlers.admin_call("writes", "entity_merge", {"keep": A, "absorb": B})
    merged = await handlers.admin_call("writes", "calibrate", {"rounds": 100})
    assert merged["store_sources"]["person_merges"] == 1 and merged["store_sources"]["person_unmerges"] == 0
    await handlers.admin_call("writes", "entity_unmerge", {"entity": A, "alias": B})
    undone = await handlers.admin_call("writes", "calibrate", {"rounds": 100})
    assert undone["store_sources"]["person_merges"] == 0 and undone["store_sources"]["person_unmerges"] == 1


@pytest.mark.parametrize(("verb", "args", "code", "words"), [
    ("entity_merge", {"keep": A, "absorb": "Nothing like it"}, "not_found", "no entity named 'Nothing like it'"),
    ("entity_merge", {"keep": A, "absorb": A.upper()}, "invalid_argument", "cannot be merged into itself"),
    ("entity_merge", {"keep": "   ", "absorb": B}, "invalid_argument", "keep: String should have at least 1"),
    ("entity_merge", {"keep": A, "absorb": B, "scope": "nowhere"}, "not_found", "scope 'nowhere' does not exist"),
    ("entity_unmerge", {"entity": A, "alias": B}, "invalid_argument", "is not an entity"),
    ("entity_unmerge", {"entity": A, "alias": "Postgres"}, "invalid_argument", "is not an entity"),
    ("entity_unmerge", {"entity": "Ghost", "alias": B}, "not_found", "no entity named 'Ghost'"),
    ("entity_rename", {"entity": A, "new_name": "  "}, "invalid_argument", "new_name: String should have at least 1"),
    ("entity_unmerge", {"entity": A, "alias": ""}, "invalid_argument", "alias: String should have at least 1"),
    ("entity_rename", {"entity": A, "new_name": "Postgres"}, "invalid_argument", "already answers to 'Postgres'"),
    ("entity_rename", {"entity": A, "new_name": A}, "invalid_argument", "already has that name"),
    ("entity_rename", {"entity": "Ghost", "new_name": "Spirit"}, "not_found", "no entity named 'Ghost'"),
    ("entity_deferred", {"scope": "nowhere"}, "not_found", "scope 'nowhere' does not exist"),
])
async def test_bad_input_gets_a_typed_error_and_changes_nothing(
    handlers: Handlers, verb: str, args: dict[str, Any], code: str, words: str
) -> None:
    await build(handlers)
    before, tables = await counts(handlers), await snapshot_tables(handlers)
    with pytest.raises(EchoError) as caught:
        await handlers.admin_call("writes", verb, args)
    assert caught.value.code == code and not caught.value.retryable, caught.value.message
    assert words in caught.value.message
    assert await counts(handlers) == before and await snapshot_tables(handlers) == tables


async def test_merge_refuses_chains_the_wrong_way_another_scopes_entity_and_non_admins(handlers: Handlers) -> None:
    await build(handlers)
    await handlers.admin_call("writes", "scope_create", {"name": "team-b"})
    other = await handlers.call(
        Caller(org=handlers.org, agent_id=AGENT, read_scopes=["*"], write_scopes=["*"]), "writes", "write_episode",
        {"session_id": "s-b", "scope": "team-b", "entities": [{"name": "Billing", "type": "service"},
                                                               {"name": "Ledger", "type": "database"}],
         "facts": [{"source": "Billing", "target": "Ledger", "relation": "writes to",
                    "fact": "Billing writes to the ledger.", "confidence": "extracted"}]})
    assert other["stored"], other
    row = await (await handlers.conn.execute("SELECT id FROM entities WHERE name = 'Billing'")).fetchone()
    assert row is not None
    before = await counts(handlers)
    cases = [
        ({"keep": A, "absorb": str(row[0])}, "in another scope"),
    ]
    await handlers.admin_call("writes", "entity_merge", {"keep": A, "absorb": B})
    after_merge = await counts(handlers)
    assert after_merge["entity_merges"] == before["entity_merges"] + 1
    cases += [
        ({"keep": A, "absorb": B}, "already merged into 'Checkout service'"),
        ({"keep": B, "absorb": "Postgres"}, "already merged into 'Checkout service'"),
    ]
    for args, words in cases:
        with pytest.raises(EchoError) as caught:
            await handlers.admin_call("writes", "entity_merge", args)
        assert caught.value.code == "invalid_argument" and words in caught.value.message, caught.value.message
    star = Caller(org=handlers.org, agent_id="ci-bot", read_scopes=["*"], write_scopes=["*"])
    for verb, args in (("entity_merge", {"keep": A, "absorb": "Postgres"}), ("entity_unmerge", {"entity": A, "alias": B}),
                       ("entity_rename", {"entity": A, "new_name": "Other"}), ("entity_deferred", {})):
        for who in (agent(handlers), star):
            with pytest.raises(EchoError) as denied:
                await handlers.call(who, "writes", verb, args)
            assert denied.value.code == "scope_denied" and f"agent '{who.agent_id}' may not" in denied.value.message
    assert await counts(handlers) == after_merge


async def test_a_question_naming_the_surviving_entity_reaches_the_absorbed_ones_facts_through_the_graph(
    handlers: Handlers,
) -> None:
    ids = await build(handlers)
    b_fact = ids[f"{B}->Stripe"]
    asked = {"query": "what does the checkout service depend on?", "top_k": 20}

    def by_graph(answer: dict[str, Any]) -> set[str]:
        return {r["id"] for r in answer["results"] if "graph" in r["matched"]}

    assert b_fact not in by_graph(await query(handlers, **asked))  # B is not connected to A before
    await handlers.admin_call("writes", "entity_merge", {"keep": A, "absorb": B})
    assert b_fact in by_graph(await query(handlers, **asked))
    await handlers.admin_call("writes", "entity_unmerge", {"entity": A, "alias": B})
    assert b_fact not in by_graph(await query(handlers, **asked))


async def test_merges_chain_and_each_unmerge_takes_back_exactly_one_link(handlers: Handlers) -> None:
    ids = await build(handlers)
    b_fact, pg_fact = ids[f"{B}->Stripe"], ids[f"{A}->Postgres"]
    await write(handlers, [("Commerce suite", "system"), ("Datadog", "tool")],
                [("Commerce suite", "Datadog", "is watched in", "The commerce suite is watched in Datadog.",
                  None)], session="s-c")
    await handlers.admin_call("writes", "entity_merge", {"keep": A, "absorb": B})
    await handlers.admin_call("writes", "entity_merge", {"keep": "Commerce suite", "absorb": A})
    # B answers as A, A as the suite: about the suite reaches both, about B means the suite.
    about_c = {r["id"] for r in (await query(handlers, about=["Commerce suite"]))["results"]}
    assert {b_fact, pg_fact} <= about_c
    assert {r["id"] for r in (await query(handlers, about=[B]))["results"]} == about_c
    with pytest.raises(EchoError) as caught:
        await handlers.admin_call("writes", "entity_unmerge", {"entity": "Commerce suite", "alias": B})
    assert caught.value.code == "invalid_argument"
    assert f"'{B}' was merged into '{A}'" in caught.value.message, caught.value.message
    # Taking A back out brings B with it (B still answers as A), and nothing of the suite's.
    await handlers.admin_call("writes", "entity_unmerge", {"entity": "Commerce suite", "alias": A})
    about_a = {r["id"] for r in (await query(handlers, about=[A]))["results"]}
    assert {b_fact, pg_fact} <= about_a
    assert {r["id"] for r in (await query(handlers, about=["Commerce suite"]))["results"]}.isdisjoint(about_a)
