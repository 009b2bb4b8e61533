"""The hot tier's own indexes (`hot_facts`, `hot_pending`): which facts they hold as writes, runs,
undo and erasure go by, and a hot search that reads them (through HNSW, as on a large store)."""

from __future__ import annotations

from typing import Any

from tier_helpers import fact as _fact
from tier_helpers import shared_caller as _caller

from echo_memory.libs.core.config.retrieval import RetrievalSettings
from echo_memory.libs.core.config.settings import Settings
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.consolidation import hot_copy

OLD = "The ledger service settles card payouts every night at two."
NEW = "The ledger service exposes a gRPC API for balances."
LONE = "The fax gateway converts invoices to PDF before sending."
LATER = "The fax gateway retries a failed transmission after five minutes."

HOT_FACTS = "SELECT f.text FROM hot_facts h JOIN facts f ON f.id = h.fact_id"
PENDING = "SELECT f.text FROM hot_pending p JOIN facts f ON f.id = p.fact_id"
HOT = "SELECT f.text FROM facts f WHERE NOT EXISTS (SELECT 1 FROM fact_tiers ft WHERE ft.fact_id = f.id)"
# The graph's hot edges are never waiting: exactly the hot facts, after every write, run and undo.
HOT_EDGES = """
SELECT f.text FROM hot_edges e JOIN facts f
  ON f.id = e.fact_id AND f.scope_id = e.scope_id AND f.source_entity = e.source_entity
 AND f.target_entity = e.target_entity
"""


async def _texts(handlers: Handlers, sql: str) -> set[str]:
    return {row[0] for row in await (await handlers.conn.execute(sql)).fetchall()}


async def _write(handlers: Handlers, facts: list[dict[str, Any]]) -> list[str]:
    names = {n for f in facts for n in (f["source"], f["target"])}
    written = await handlers.call(_caller(handlers), "writes", "write_episode", {
        "session_id": "s", "entities": [{"name": n, "type": "service"} for n in sorted(names)], "facts": facts})
    assert written["stored"] is True
    return [edge["fact_id"] for edge in written["edges_created"]]


async def _search(handlers: Handlers, query: str) -> dict[str, list[str]]:
    result = await handlers.call(_caller(handlers), "retrieval", "query_memory",
                                 {"query": query, "top_k": 5, "tier": "hot"})
    return {item["text"]: item["matched"] for item in result["results"]}


async def test_the_hot_index_holds_the_hot_facts_a_run_placed_and_waits_for_the_rest(
        handlers: Handlers, embedder: MiniLM) -> None:
    ids = await _write(handlers, [_fact("Ledger service", "Payouts", "settles", OLD),
                                  _fact("Ledger service", "gRPC", "exposes", NEW),
                                  _fact("Fax gateway", "PDF", "converts to", LONE)])
    # A write adds no vector index work: its facts wait for a run.
    assert await _texts(handlers, PENDING) == {OLD, NEW, LONE} and await _texts(handlers, HOT_FACTS) == set()
    assert await _texts(handlers, HOT_EDGES) == {OLD, NEW, LONE}
    await handlers.conn.execute("UPDATE facts SET written_at = now() - interval '200 days' WHERE text IN (%s, %s)",
                                (OLD, LONE))
    await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    assert await _texts(handlers, HOT_FACTS) == await _texts(handlers, HOT) == await _texts(handlers, HOT_EDGES) == {NEW}
    assert await _texts(handlers, PENDING) == set()
    # The planner knows the new digests at commit, not only after autovacuum's analyze.
    assert await (await handlers.conn.execute(
        "SELECT reltuples::bigint = (SELECT count(*) FROM digests) FROM pg_class WHERE relname = 'digests'"
    )).fetchone() == (True,)

    # The dense channel through HNSW, as above the threshold: what the run placed hot from its
    # index, what was written since from `hot_pending`, and nothing consolidated but via a digest.
    hnsw = Handlers(handlers.conn, handlers.org, embedder,
                    Settings(org=handlers.org, retrieval=RetrievalSettings(hnsw_threshold=0)))
    [later] = await _write(handlers, [_fact("Fax gateway", "Modem", "retries through", LATER)])
    assert await _texts(handlers, PENDING) == {LATER}
    assert "dense" in (await _search(hnsw, "what API does the ledger expose for balances"))[NEW]
    found = await _search(hnsw, "how long until a failed fax transmission is retried")
    assert "dense" in found[LATER] and "lexical" in found[LATER]
    assert all(matched == ["via_digest"] or "via_digest" in matched or text not in (OLD, LONE)
               for text, matched in found.items())

    # The next run copies what was written since; the facts those searches read come back hot too.
    await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    assert LATER in await _texts(handlers, HOT_FACTS)
    assert await _texts(handlers, HOT_FACTS) == await _texts(handlers, HOT) and await _texts(handlers, PENDING) == set()
    found = await _search(hnsw, "how long until a failed fax transmission is retried")
    assert "dense" in found[LATER] and "lexical" in found[LATER]

    # Undo puts what the run demoted back in the hot tier; they wait in `hot_pending` (no vector
    # index work in the undo), a hot search finds them there, and the next run copies them over.
    await handlers.conn.execute("DELETE FROM read_results")
    demoting = await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    assert await _texts(handlers, HOT_FACTS) == await _texts(handlers, HOT) == {NEW, LATER}
    assert await _texts(handlers, HOT_EDGES) == {NEW, LATER}
    await handlers.admin_call("consolidation", "consolidate_undo", {"run_id": demoting["runs"][0]["run_id"]})
    assert await _texts(handlers, HOT) == await _texts(handlers, HOT_EDGES) == {OLD, NEW, LONE, LATER}
    assert await _texts(handlers, HOT_FACTS) == {NEW, LATER} and await _texts(handlers, PENDING) == {OLD, LONE}
    found = await _search(hnsw, "when does the ledger settle card payouts")
    assert "dense" in found[OLD]
    await handlers.conn.execute("DELETE FROM read_results")
    await handlers.conn.execute("UPDATE facts SET written_at = now() WHERE text IN (%s, %s)", (OLD, LONE))
    await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    assert await _texts(handlers, HOT_FACTS) == await _texts(handlers, HOT) == {OLD, NEW, LONE, LATER}
    assert await _texts(handlers, PENDING) == set()

    # A fact re-embedded (reindex after a model change) keeps its copy in step.
    await handlers.conn.execute("UPDATE facts SET embedding = (SELECT embedding FROM facts WHERE text = %s) "
                                "WHERE text = %s", (LONE, NEW))
    assert await (await handlers.conn.execute(
        "SELECT h.embedding = f.embedding FROM hot_facts h JOIN facts f ON f.id = h.fact_id WHERE f.text = %s",
        (NEW,))).fetchone() == (True,)

    # An erased fact's copy (its vector and its words) goes with it.
    await handlers.admin_call("writes", "forget", {"fact_id": later, "confirm": True, "reason": "request"})
    assert await _texts(handlers, HOT_FACTS) == await _texts(handlers, HOT_EDGES) == {OLD, NEW, LONE}
    assert ids and await _texts(handlers, PENDING) == set()


RESTATED = "The ledger service settles card payouts every hour."
RETRIED = "The fax gateway retries a failed transmission after ten minutes."
# A copy's window is its fact's validity when the run copied it.
WRONG_WINDOWS = """
SELECT count(*) FROM hot_facts h JOIN facts f ON f.id = h.fact_id
WHERE h.visible_from IS DISTINCT FROM f.t_valid OR h.visible_until IS DISTINCT FROM f.t_invalid
"""


async def test_a_hot_fact_ended_or_dated_after_its_copy_was_made_is_never_returned(
        handlers: Handlers, embedder: MiniLM) -> None:
    await _write(handlers, [_fact("Ledger service", "Payouts", "settles", OLD),
                            _fact("Fax gateway", "PDF", "converts to", LONE),
                            _fact("Fax gateway", "Modem", "retries through", LATER)])
    await _write(handlers, [_fact("Fax gateway", "Modem", "retries through", RETRIED)])  # ends LATER
    await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    assert {OLD, LONE} <= await _texts(handlers, HOT_FACTS)
    # Copies carry their facts' validity, the ended one's end included.
    assert await (await handlers.conn.execute(
        "SELECT h.visible_until IS NOT NULL FROM hot_facts h JOIN facts f ON f.id = h.fact_id WHERE f.text = %s",
        (LATER,))).fetchone() == (True,)
    assert await (await handlers.conn.execute(WRONG_WINDOWS)).fetchone() == (0,)
    hnsw = Handlers(handlers.conn, handlers.org, embedder,
                    Settings(org=handlers.org, retrieval=RetrievalSettings(hnsw_threshold=0)))
    payouts, pdf = "when does the ledger settle card payouts", "which gateway converts invoices to PDF"
    assert {"dense", "lexical"} <= set((await _search(hnsw, payouts))[OLD])

    # A new version of the edge ends the old one. The write touches no table of the hot tier (so
    # it never waits for a run): the copy keeps the window it was made with, and the hot search
    # checks the rows it returns against the facts themselves.
    await _write(handlers, [_fact("Ledger service", "Payouts", "settles", RESTATED)])
    assert {OLD, LONE} <= await _texts(handlers, HOT_FACTS)
    found = await _search(hnsw, payouts)
    assert OLD not in found and {"dense", "lexical"} <= set(found[RESTATED])

    # A fact dated into the future (an update of its validity) is not visible now either.
    assert LONE in await _search(hnsw, pdf)
    await handlers.conn.execute("UPDATE facts SET t_valid = now() + interval '1 day' WHERE text = %s", (LONE,))
    assert LONE not in await _search(hnsw, pdf)

    # A run copies what was written since with its fact's window as it is then.
    await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    assert RESTATED in await _texts(handlers, HOT_FACTS) and await _texts(handlers, PENDING) == set()
    found = await _search(hnsw, payouts)
    assert OLD not in found and {"dense", "lexical"} <= set(found[RESTATED])


SHARED_ID = "SELECT id::text FROM scopes WHERE name = 'shared'"
WRITTEN = "SELECT f.text FROM hot_pending p JOIN facts f ON f.id = p.fact_id WHERE p.written"
FIRST = "The ledger service signs each payout batch with a hardware key."


async def test_facts_written_since_a_run_are_copied_between_runs_and_the_rest_wait_for_one(
        handlers: Handlers) -> None:
    await _write(handlers, [_fact("Ledger service", "Payouts", "settles", OLD),
                            _fact("Ledger service", "gRPC", "exposes", NEW),
                            _fact("Fax gateway", "PDF", "converts to", LONE)])
    scope_id = str((await (await handlers.conn.execute(SHARED_ID)).fetchone())[0])  # type: ignore[index]
    # Before a scope's first run nothing is copied: the run places everything first.
    assert await _texts(handlers, WRITTEN) == {OLD, NEW, LONE}
    assert await hot_copy.copy_batch(handlers.conn, scope_id) == (0, 0)
    await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    assert await _texts(handlers, HOT_FACTS) == {OLD, NEW, LONE}
    await handlers.conn.execute("UPDATE facts SET written_at = now() - interval '200 days' WHERE text IN (%s, %s)",
                                (OLD, LONE))
    await handlers.conn.execute("DELETE FROM read_results")
    demoting = await handlers.admin_call("consolidation", "consolidate", {"scope": "shared"})
    assert await _texts(handlers, HOT_FACTS) == {NEW} and await _texts(handlers, PENDING) == set()

    # Written since: copied in batches; what an undo brought back waits for the next run.
    await _write(handlers, [_fact("Fax gateway", "Modem", "retries through", LATER),
                            _fact("Ledger service", "HSM", "signs with", FIRST)])
    await handlers.admin_call("consolidation", "consolidate_undo", {"run_id": demoting["runs"][0]["run_id"]})
    assert await _texts(handlers, PENDING) == {OLD, LONE, LATER, FIRST}
    assert await _texts(handlers, WRITTEN) == {LATER, FIRST}
    assert await hot_copy.copy_batch(handlers.conn, scope_id, batch=1) == (1, 1)
    assert await hot_copy.copy_batch(handlers.conn, scope_id, batch=1) == (1, 1)
    assert await hot_copy.copy_batch(handlers.conn, scope_id, batch=1) == (0, 0)
    assert await _texts(handlers, HOT_FACTS) == {NEW, LATER, FIRST}
    assert await _texts(handlers, PENDING) == {OLD, LONE}

    # A written fact a run placed lower meanwhile leaves `hot_pending` without a copy.
    [moved] = await _write(handlers, [_fact("Fax gateway", "Toner", "orders", "The fax gateway orders toner.")])
    await handlers.conn.execute("INSERT INTO fact_tiers (fact_id, tier) VALUES (%s, 'consolidated')", (moved,))
    assert await hot_copy.copy_batch(handlers.conn, scope_id) == (1, 0)
    assert await _texts(handlers, HOT_FACTS) == {NEW, LATER, FIRST}
    assert await _texts(handlers, PENDING) == {OLD, LONE}
