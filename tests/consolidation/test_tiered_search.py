"""query_memory `tier: "hot"` (the default): hot facts through every channel, consolidated facts only
through the digests nearest the query (and then scored on words too); `all` and `as_of` see every tier."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tier_helpers import fact as _fact
from tier_helpers import shared_caller as _caller

from echo_memory.libs.core.config.consolidation import ConsolidationSettings
from echo_memory.libs.core.config.retrieval import QualityGates, RetrievalSettings
from echo_memory.libs.core.config.settings import Settings
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.telemetry import steps
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.retrieval import queries as q

OLD = "The ledger service settles card payouts every night at two."
NEW = "The ledger service exposes a gRPC API for balances."
LONE = "The fax gateway converts invoices to PDF before sending."


async def _query(handlers: Handlers, query: str, **extra: Any) -> list[tuple[str, list[str]]]:
    result = await handlers.call(_caller(handlers), "retrieval", "query_memory", {"query": query, "top_k": 5, **extra})
    return [(item["text"], item["matched"]) for item in result["results"]]


async def _write_ledger_and_fax(handlers: Handlers) -> None:
    """Two unrelated facts in one write: the ledger's nightly payouts (OLD) and the fax gateway's (LONE)."""
    entities = [{"name": n, "type": t} for n, t in [("Ledger service", "service"), ("Payouts", "process"),
                                                      ("Fax gateway", "service"), ("PDF", "format")]]
    facts = [_fact("Ledger service", "Payouts", "settles", OLD), _fact("Fax gateway", "PDF", "converts to", LONE)]
    written = await handlers.call(_caller(handlers), "writes", "write_episode",
                                  {"session_id": "s", "entities": entities, "facts": facts})
    assert written["stored"] is True


async def _date_back_and_consolidate(handlers: Handlers) -> None:
    """Every fact written 200 days ago, then a run over the shared scope: facts nobody read leave the hot tier."""
    await handlers.conn.execute("UPDATE facts SET written_at = now() - interval '200 days'")
    await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})


async def test_a_hot_search_reaches_consolidated_facts_through_their_digest_only(handlers: Handlers) -> None:
    entities = [{"name": n, "type": t} for n, t in [("Ledger service", "service"), ("Payouts", "process"),
                                                      ("gRPC", "protocol"), ("Postgres", "database"),
                                                      ("Fax gateway", "service"), ("PDF", "format")]]
    facts = [_fact("Ledger service", "Payouts", "settles", OLD), _fact("Ledger service", "gRPC", "exposes", NEW),
             _fact("Ledger service", "Postgres", "stores balances in", "The ledger service stores balances in Postgres."),
             _fact("Fax gateway", "PDF", "converts to", LONE)]
    written = await handlers.call(_caller(handlers), "writes", "write_episode",
                                  {"session_id": "s", "entities": entities, "facts": facts})
    assert written["stored"] is True
    await handlers.conn.execute("UPDATE facts SET written_at = now() - interval '200 days' WHERE text IN (%s, %s)",
                                (OLD, LONE))
    await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    tiers = dict(await (await handlers.conn.execute(
        "SELECT f.text, coalesce(ft.tier, 'hot') FROM facts f LEFT JOIN fact_tiers ft ON ft.fact_id = f.id")).fetchall())
    assert tiers[OLD] == tiers[LONE] == "consolidated" and tiers[NEW] == "hot"

    # Make the planner prefer reading the table. (Whether it then walks the digests' HNSW index
    # depends on their statistics, which a run now leaves current: on these three digests a btree
    # is the cheaper read; at 3,722 it walks the index, BENCHMARKS.md run x.)
    await handlers.conn.execute("SET LOCAL random_page_cost = 100000")
    hot = await _query(handlers, "when are card payouts settled", tier="hot")
    await handlers.conn.execute("RESET random_page_cost")
    # The planner settings switched off for that statement are back on for whatever the
    # transaction runs next.
    settings = await (await handlers.conn.execute(
        "SELECT current_setting('enable_seqscan'), current_setting('enable_bitmapscan'), "
        "current_setting('hnsw.ef_search')")).fetchone()
    assert settings == ("on", "on", str(q.EF_SEARCH))
    # Reached through the ledger service's digest, not a facts channel, then scored on its words as
    # a hot fact would be; the first answer, as in a search of every tier.
    assert hot[0] == (OLD, ["lexical", "via_digest"])
    assert all("via_digest" not in matched or text != NEW for text, matched in hot)

    # The fax gateway has one fact: no entity digest, but a topic of its own, so still reachable.
    assert dict(await _query(handlers, "fax invoices converted to PDF", tier="hot")).get(LONE) == ["lexical", "via_digest"]
    # A member that shares no word with the query keeps its cosine alone.
    assert dict(await _query(handlers, "when does money go out to merchants each evening", tier="hot")).get(OLD) == [
        "via_digest"]
    # The default is the hot search; `tier: "all"` is the deep one, where the facts channels find it.
    assert await _query(handlers, "fax invoices converted to PDF") == await _query(
        handlers, "fax invoices converted to PDF", tier="hot")
    full = dict(await _query(handlers, "fax invoices converted to PDF", tier="all"))
    assert LONE in full and "dense" in full[LONE]
    # Looking into the past searches every tier whatever `tier` says.
    past = dict(await _query(handlers, "fax invoices converted to PDF", tier="hot", as_of=datetime.now(UTC).isoformat()))
    assert LONE in past


async def test_a_hot_search_reaches_a_consolidated_fact_by_its_rare_words(handlers: Handlers, embedder: MiniLM) -> None:
    await _write_ledger_and_fax(handlers)
    await _date_back_and_consolidate(handlers)
    # One digest expanded per route: the nearest in meaning holds the gateway's fact, and only a
    # word of the query ("night") leads to the ledger's.
    one = Handlers(handlers.conn, handlers.org, embedder,
                   Settings(org=handlers.org, retrieval=RetrievalSettings(digests_expanded=1)))
    query = "bills turned into printable documents before they are sent out at night"
    result = await one.call(_caller(handlers), "retrieval", "query_memory", {"query": query, "top_k": 5, "tier": "hot"})
    found = {item["text"]: item["matched"] for item in result["results"]}
    assert found == {LONE: ["via_digest"], OLD: ["lexical", "via_digest"]}
    # With the lexical channel switched off (an ablation), words lead nowhere either.
    no_words = Handlers(handlers.conn, handlers.org, embedder, Settings(org=handlers.org, retrieval=RetrievalSettings(
        digests_expanded=1, channels=("dense", "graph", "neighbour"))))
    result = await no_words.call(_caller(handlers), "retrieval", "query_memory",
                                 {"query": query, "top_k": 5, "tier": "hot"})
    assert {item["text"]: item["matched"] for item in result["results"]} == {LONE: ["via_digest"]}


LEDGER = [
    ("Payouts", "settles", "The ledger service settles card payouts every night at two."),
    ("gRPC", "exposes", "The ledger service exposes a gRPC API for balances."),
    ("Postgres", "stores balances in", "The ledger service stores balances in Postgres."),
    ("Kafka", "publishes to", "The ledger service publishes settlement events to Kafka."),
    ("Auditors", "reports to", "The ledger service sends a monthly reconciliation report to the auditors."),
    ("Redis", "caches in", "The ledger service caches exchange rates in Redis for five minutes."),
    ("Go", "is written in", "The ledger service is written in Go and built with Bazel."),
    ("Payments team", "is owned by", "The ledger service is owned by the payments team in Berlin."),
    ("Fraud service", "calls", "The ledger service calls the fraud service before each large transfer."),
    ("S3", "archives to", "The ledger service archives closed statements to S3 after a year."),
    ("Grafana", "is watched in", "The ledger service's error rate is watched on a Grafana board."),
    ("Terraform", "is deployed by", "The ledger service is deployed by Terraform into two regions."),
]


async def _ledger_consolidated(handlers: Handlers, embedder: MiniLM, retrieval: RetrievalSettings) -> Handlers:
    """The ledger's twelve facts written long ago and consolidated into topics of at most two (six or
    more) and one entity digest holding all twelve; handlers searching with `retrieval`."""
    handlers = Handlers(handlers.conn, handlers.org, embedder, Settings(
        org=handlers.org, consolidation=ConsolidationSettings(topic_cap=2), retrieval=retrieval))
    entities = [{"name": "Ledger service", "type": "service"}, *({"name": t, "type": "thing"} for t, _, _ in LEDGER)]
    written = await handlers.call(_caller(handlers), "writes", "write_episode", {
        "session_id": "s", "entities": entities,
        "facts": [_fact("Ledger service", target, relation, text) for target, relation, text in LEDGER]})
    assert written["stored"] is True
    await _date_back_and_consolidate(handlers)
    return handlers


async def test_a_hot_search_expands_topics_not_an_entity_digest(handlers: Handlers, embedder: MiniLM) -> None:
    # Topics of at most two facts, so the ledger's twelve facts make six topics or more, and one
    # entity digest holding all twelve. An entity digest grows with everything its entity ever
    # touched (at 1M facts, thousands of members); its facts are all in topics, which are capped.
    conn = handlers.conn
    handlers = await _ledger_consolidated(handlers, embedder,
                                          RetrievalSettings(channels=("dense",), gates=QualityGates.off()))
    kinds: dict[str, int] = dict(await (await conn.execute(
        "SELECT kind, count(*) FROM digests WHERE valid_to IS NULL GROUP BY kind")).fetchall())
    assert kinds["entity"] == 1 and kinds["topic"] >= 6

    query = "how does the ledger service pay out and report money"
    result = await handlers.call(_caller(handlers), "retrieval", "query_memory",
                                 {"query": query, "top_k": 20, "tier": "hot"})
    reached = {item["text"] for item in result["results"] if "via_digest" in item["matched"]}
    # The members of the topics nearest the query, in exact order: what the hot search may expand.
    nearest = await (await conn.execute(
        "SELECT d.member_ids FROM digests d WHERE d.valid_to IS NULL AND d.kind = 'topic' "
        "ORDER BY d.embedding <=> %s LIMIT %s",
        (embedder.embed_one(query), RetrievalSettings().digests_expanded))).fetchall()
    members = [str(m) for row in nearest for m in row[0]]
    allowed = {r[0] for r in await (await conn.execute(
        "SELECT text FROM facts WHERE id = ANY(%s::uuid[])", (members,))).fetchall()}
    assert reached and reached <= allowed
    assert len(allowed) < len(LEDGER)  # the entity digest would have reached the rest


async def test_a_hot_search_reaches_an_entity_digests_facts_by_the_query_words_they_hold(
        handlers: Handlers, embedder: MiniLM) -> None:
    # A query naming two of the ledger's facts by a rare word each, and near neither in meaning:
    # the entity digest holds both words, no topic does, so it is the digest the words lead to (one
    # expanded; areas are never expanded).
    conn = handlers.conn
    handlers = await _ledger_consolidated(handlers, embedder,
                                          RetrievalSettings(digests_expanded=1, gates=QualityGates.off()))
    kafka, bazel = LEDGER[3][2], LEDGER[6][2]
    holding_both = await (await conn.execute(
        "SELECT kind FROM digests WHERE valid_to IS NULL AND kind <> 'area' AND tsv @@ 'kafka & bazel'::tsquery"
    )).fetchall()
    assert holding_both == [("entity",)]

    result = await handlers.call(_caller(handlers), "retrieval", "query_memory",
                                 {"query": "is Kafka or Bazel involved anywhere", "top_k": 10, "tier": "hot"})
    reached = {item["text"]: item["matched"] for item in result["results"]}
    assert "via_digest" in reached.get(kafka, []) and "via_digest" in reached.get(bazel, [])

    # A fact of the entity that has ended is not reached, though the digest still lists it.
    await conn.execute("UPDATE facts SET t_invalid = clock_timestamp() WHERE text = %s", (kafka,))
    result = await handlers.call(_caller(handlers), "retrieval", "query_memory",
                                 {"query": "is Kafka or Bazel involved anywhere", "top_k": 10, "tier": "hot"})
    reached = {item["text"]: item["matched"] for item in result["results"]}
    assert kafka not in reached and "via_digest" in reached.get(bazel, [])


async def test_a_word_most_facts_hold_leads_to_no_digest(handlers: Handlers, embedder: MiniLM) -> None:
    await _write_ledger_and_fax(handlers)
    await _date_back_and_consolidate(handlers)
    [(scope_id,)] = await (await handlers.conn.execute("SELECT id FROM scopes WHERE name = 'shared'")).fetchall()
    query = "invoices"
    binds = {"scope_ids": [scope_id], "at": datetime.now(UTC), "query": query,
             "embedding": embedder.embed_one(query), "digests": 5, "members": 20}

    async def route() -> set[str]:
        rows = await (await handlers.conn.execute(q.DIGEST_MEMBERS_BY_WORDS, binds)).fetchall()
        return {r[0] for r in await (await handlers.conn.execute(
            "SELECT text FROM facts WHERE id = ANY(%s::uuid[])", ([row[0] for row in rows],))).fetchall()}

    assert await route() == {LONE}
    # The statistics of a store where more than CANDIDATE_POSTINGS facts hold the word: the
    # lexical channel still draws candidates from it (the rarest word always), the digests not.
    await handlers.conn.execute("UPDATE lexical_stats SET doc_count = %s WHERE scope_id = %s AND corpus = 'facts'",
                                (100 * q.CANDIDATE_POSTINGS, scope_id))
    await handlers.conn.execute(
        "UPDATE lexical_df SET df = %s WHERE scope_id = %s AND corpus = 'facts' AND term = 'invoic'",
        (q.CANDIDATE_POSTINGS + 1, scope_id))
    assert await route() == set()


async def _timed_query(handlers: Handlers, query: str) -> tuple[list[tuple[str, list[str]]], set[str]]:
    """The default search's results and the steps it ran."""
    sink = steps.collect()
    try:
        found = await _query(handlers, query)
    finally:
        steps.stop()
    [timings] = [t for verb, t in sink if verb == "query_memory"]
    return found, set(timings)


async def test_a_store_no_run_has_placed_is_searched_without_asking_for_digests(handlers: Handlers) -> None:
    await _write_ledger_and_fax(handlers)
    query = "fax invoices converted to PDF"
    before, ran = await _timed_query(handlers, query)
    assert "channel_via_digest" not in ran and "channel_dense" in ran
    assert before == await _query(handlers, query, tier="all")  # every fact is hot: the same search

    await _date_back_and_consolidate(handlers)
    after, ran = await _timed_query(handlers, query)
    assert "channel_via_digest" in ran  # the run left digests (the facts stay hot: the queries read them)
    assert "via_digest" in dict(after)[LONE]
