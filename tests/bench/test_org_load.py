"""The organisation history, its COPY loader and `benchmark-tiers` over it.

The loader stores the rows `write_episode` stores: the same small history (agents, projects,
look-alike names, restated edges) goes into one scope through the real write path, session by
session, and into another by COPY; every fact, entity, episode and lexical statistic must match,
timestamps aside (the write path stamps its own clock).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.local.eval import org_load, tier_bench
from echo_memory.libs.local.eval.org_history import OrgHistory, OrgShape, entity_type
from echo_memory.libs.local.eval.org_load import load_history, load_reads
from echo_memory.libs.local.eval.vector_cache import VectorCache
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing.tiers import Handlers

BIN = Path(sys.executable).parent / "echo-memory"
TINY = Path(__file__).with_name("fixtures") / "agent_facts_tiny.json"
SHAPE = OrgShape(agents=4, projects=2, entities_per_project=10, superseded_share=0.25, look_alike_share=0.3, seed=3)

FACTS = """
SELECT s.name, t.name, f.relation, f.text, f.confidence, f.t_invalid IS NULL, p.text, f.agent_id, f.tool, f.project,
       f.session_id, f.token_count, f.flags, f.embedding::text
FROM facts f JOIN entities s ON s.id = f.source_entity JOIN entities t ON t.id = f.target_entity
LEFT JOIN facts p ON p.id = f.supersedes
WHERE f.scope_id = %s ORDER BY f.text
"""
ENTITIES = "SELECT name, type, created_by, embedding::text FROM entities WHERE scope_id = %s ORDER BY name"
EPISODES = """
SELECT kind, agent_id, tool, project, session_id, content, token_count, flags FROM episodes
WHERE scope_id = %s ORDER BY session_id, content
"""
LEXICAL = """
SELECT corpus, doc_count, total_length, format_version, (SELECT array_agg(term || ':' || df ORDER BY term)
    FROM lexical_df d WHERE d.scope_id = s.scope_id AND d.corpus = s.corpus)
FROM lexical_stats s WHERE scope_id = %s ORDER BY corpus
"""
MODEL = "SELECT model FROM scope_embeddings WHERE scope_id = %s"


async def _scope(handlers: Handlers, name: str) -> str:
    await handlers.admin_call("writes", "scope_create", {"name": name})
    row = await (await handlers.conn.execute("SELECT id::text FROM scopes WHERE name = %s", (name,))).fetchone()
    assert row is not None
    return str(row[0])


async def _write_sessions(handlers: Handlers, history: OrgHistory, scope: str) -> None:
    known: set[str] = set()
    for members in history.sessions():
        facts = [history.facts[i] for i in members]
        first = facts[0]
        names = list(dict.fromkeys(n for f in facts for n in (f.source, f.target)))
        caller = Caller(org=handlers.org, agent_id=first.agent, tool=first.tool, read_scopes=[scope],
                        write_scopes=[scope])
        result = await handlers.call(caller, "writes", "write_episode", {
            "scope": scope, "session_id": first.session, "project": first.project,
            "entities": [{"name": n, "type": entity_type(n)} for n in names],
            "entity_resolutions": [{"mention": n, "entity_id": "new"} for n in names if n not in known],
            "facts": [{"source": f.source, "target": f.target, "relation": f.relation, "fact": f.text,
                       "confidence": "extracted"} for f in facts],
        })
        assert result["stored"] is True and not result["partial"], result
        assert len(result["edges_created"]) == len(facts), result
        known.update(names)


async def _rows(handlers: Handlers, sql: str, scope_id: str) -> list[tuple[Any, ...]]:
    return list(await (await handlers.conn.execute(sql, (scope_id,))).fetchall())


def _split_vectors(rows: list[tuple[Any, ...]]) -> tuple[list[tuple[Any, ...]], np.ndarray]:
    """Rows without their last column (a vector as text), and those vectors."""
    return [r[:-1] for r in rows], np.array([[float(v) for v in r[-1].strip("[]").split(",")] for r in rows])


async def test_copy_stores_the_rows_the_write_path_stores(handlers: Handlers, embedder: MiniLM,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(org_load, "EMBED_CHUNK", 16)  # five chunks, each embedding while the last streams in
    history = OrgHistory(80, SHAPE)
    assert sum(f.replaces is not None for f in history.facts) >= 5  # restated edges are exercised
    assert any(f.source in g or f.target in g for g in history.look_alikes[:1] for f in history.facts)
    via_writes = await _scope(handlers, "via-writes")
    via_copy = await _scope(handlers, "via-copy")

    await _write_sessions(handlers, history, "via-writes")
    ids = await load_history(handlers.conn, via_copy, history, embedder)
    assert len(ids) == len(history.facts)

    for sql in (FACTS, ENTITIES):
        written, written_vectors = _split_vectors(await _rows(handlers, sql, via_writes))
        copied, copied_vectors = _split_vectors(await _rows(handlers, sql, via_copy))
        assert copied == written
        assert np.abs(copied_vectors - written_vectors).max() < 1e-5  # COPY writes six decimals
    for sql in (EPISODES, LEXICAL, MODEL):
        assert await _rows(handlers, sql, via_copy) == await _rows(handlers, sql, via_writes)
    ended = await _rows(handlers, "SELECT count(*) FROM facts WHERE scope_id = %s AND t_invalid IS NOT NULL", via_copy)
    assert ended == [(len(history.successors()),)]


async def test_a_vector_cache_loads_the_same_history_again_without_the_model(
        handlers: Handlers, embedder: MiniLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(org_load, "EMBED_CHUNK", 16)
    history = OrgHistory(60, SHAPE)
    texts = [f.text for f in history.facts]
    cache = VectorCache(tmp_path / "vectors", embedder.name)
    first, second = await _scope(handlers, "cache-first"), await _scope(handlers, "cache-second")
    await load_history(handlers.conn, first, history, embedder, cache=cache)
    assert [p.name for p in cache.directory.iterdir()] == [cache.path_for(texts).name]
    assert cache.path_for(texts).stat().st_mode & 0o777 == 0o600

    embedded: list[str] = []
    model = embedder.embed

    def counting(batch: list[str], batch_size: int = 64) -> np.ndarray:
        embedded.extend(batch)
        return model(batch, batch_size)

    monkeypatch.setattr(embedder, "embed", counting)
    await load_history(handlers.conn, second, history, embedder, cache=cache)
    names = {n for f in history.facts for n in (f.source, f.target)}
    assert embedded and set(embedded) <= names  # the entity names only: no fact went through the model
    copied, copied_vectors = _split_vectors(await _rows(handlers, FACTS, second))
    computed, computed_vectors = _split_vectors(await _rows(handlers, FACTS, first))
    assert copied == computed and np.array_equal(copied_vectors, computed_vectors)


def test_benchmark_tiers_refuses_a_vector_cache_for_the_flat_history(tmp_path: Path) -> None:
    run = subprocess.run(
        [str(BIN), "benchmark-tiers", "--agent-facts", str(TINY), "--sizes", "100", "--history", "flat",
         "--vector-cache", str(tmp_path / "vectors")],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 2 and "--vector-cache serves the org history only" in run.stderr
    assert not (tmp_path / "vectors").exists()


async def test_history_is_deterministic_with_valid_versions_and_reads_favour_recent_facts() -> None:
    history, again = OrgHistory(3000), OrgHistory(3000)
    assert history.facts == again.facts and history.look_alikes == again.look_alikes
    facts = history.facts
    assert len({f.agent for f in facts}) > 50 and len({f.project for f in facts}) == OrgShape().projects
    assert 0.04 < sum(f.replaces is not None for f in facts) / len(facts) < 0.12
    for index, fact in enumerate(facts):
        assert all(facts[index - 1].age_days >= fact.age_days for _ in [0] if index)  # oldest first
        if fact.replaces is not None:
            old = facts[fact.replaces]
            assert (old.source, old.target, old.relation) == (fact.source, fact.target, fact.relation)
            assert old.age_days > fact.age_days and old.text != fact.text
    groups = [set(g) for g in history.look_alikes]
    assert all(len(g) >= 2 for g in groups) and any("Jones" in " ".join(g) for g in groups)
    reads = history.reads(500)
    read_ages = sorted(facts[i].age_days for r in reads for i in r.facts)
    all_ages = sorted(f.age_days for f in facts)
    assert read_ages[len(read_ages) // 2] < all_ages[len(all_ages) // 2] / 2  # recent facts are read far more
    assert all(r.age_days <= min(facts[i].age_days for i in r.facts) for r in reads)  # read after written


async def test_reads_land_in_the_read_log_of_the_scope(handlers: Handlers, embedder: MiniLM) -> None:
    history = OrgHistory(40, SHAPE)
    scope_id = await _scope(handlers, "org-reads")
    ids = await load_history(handlers.conn, scope_id, history, embedder)
    reads = history.reads(6)
    written = await load_reads(handlers.conn, "org-reads", ids, reads)
    assert written == sum(len(r.facts) for r in reads)
    rows = await (await handlers.conn.execute(
        "SELECT count(DISTINCT r.id), count(*) FROM reads r JOIN read_results rr ON rr.read_id = r.id "
        "JOIN facts f ON f.id = rr.item_id WHERE r.scopes = ARRAY['org-reads'] AND f.scope_id = %s",
        (scope_id,))).fetchone()
    assert rows == (6, written)


def test_benchmark_tiers_reports_every_arm_invariant_and_probe_on_an_org_history(tmp_path: Path) -> None:
    run = subprocess.run(
        [str(BIN), "benchmark-tiers", "--agent-facts", str(TINY), "--sizes", "150,300", "--json"],
        capture_output=True, text=True, timeout=900,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["history"] == "org" and report["gold_facts"] == 8
    row, larger = report["rows"]
    # Each size in a database of its own: the larger store's holds its own facts only.
    assert larger["facts_in_database"] - row["facts_in_database"] == 150
    assert 0 < row["brief_ms"]["p50"] <= row["brief_ms"]["p95"] and row["brief_ms"]["n"] == 30
    assert 0 < row["brief_project_ms"]["p50"] <= row["brief_project_ms"]["p95"]
    assert row["distractors"] == 150 and row["org"]["superseded"] > 0 and row["org"]["read_results"] > 0
    assert set(row["arms"]) == {"flat", "all", "hot", "hot_gold_read"}
    assert all(0.0 <= arm["quality"]["hit10"] <= 1.0 for arm in row["arms"].values())
    # Old and never read, every gold fact is consolidated; read a day ago, a run holds each hot.
    assert set(row["hot_by_gold_tier"]) == {"consolidated"} and set(row["hot_gold_read_by_gold_tier"]) == {"hot"}
    ratio = row["consolidated_against_hot"]
    assert ratio["gold_pairs"] == row["hot_by_gold_tier"]["consolidated"]["n"] > 0
    assert ratio["consolidated_recall10"] == row["hot_by_gold_tier"]["consolidated"]["recall10"]
    assert ratio["hot_recall10"] == row["hot_gold_read_by_gold_tier"]["hot"]["recall10"] > 0
    assert ratio["ratio"] == round(ratio["consolidated_recall10"] / ratio["hot_recall10"], 3)
    for arm in ("all", "hot", "hot_gold_read"):
        assert row["arms"][arm]["postgres_cpu_ms_per_query"] > 0 and row["arms"][arm]["process_cpu_ms_per_query"] > 0
    assert row["arms"]["hot"]["via_digest_results"] > 0  # the old gold facts are reached through digests
    warm = row["hot_warm"]
    assert warm["passes"] == tier_bench.WARM_PASSES and warm["same_gold_ranks"] is True
    for spread in (warm["postgres_cpu_ms_per_query"], warm["process_cpu_ms_per_query"]):
        assert 0 < spread["min"] <= spread["median"] <= spread["max"]
    assert 0 < warm["latency_ms"]["p50"] <= warm["latency_ms"]["p95"]
    assert row["invariants"] == {"content_unchanged": True, "as_of_unchanged": True, "as_of_answers_changed": 0,
                                 "as_of_repeatable_before_the_run": True, "rebuild_identical": True}
    assert 0 < row["as_of_ms"]["p50"] <= row["as_of_ms"]["p95"]
    run_cost = row["consolidation"]
    assert run_cost["postgres_cpu_s"] > 0 and run_cost["vacuum_after"]["wall_s"] > 0
    assert run_cost["prewarm"]["unavailable"] is None and run_cost["prewarm"]["pages"] > 0
    assert run_cost["vacuum_after"]["digests_all_visible"] >= 0.9  # the brief's index-only scans skip the heap
    reach = row["digest_reach"]
    assert reach["gold_pairs"] > 0 and 0 < reach["in_an_expanded_digest"] <= reach["in_a_digest"] <= 1
    probes = row["probes"]
    assert probes["digests"] > 0
    assert probes["topic_digests_mixing_look_alikes"] == probes["look_alike_digests_holding_another"] == 0
    assert probes["area_digests_mixing_look_alikes"] == 0
    assert probes["by_kind"]["area"] > 0 and probes["top_nodes"] < probes["by_kind"]["topic"]
    assert probes["digests_holding_a_fact_and_its_successor"] == 0
    text = tier_bench.render(report)  # the report without --json: every arm, the ratio and the prewarm
    assert "hot_gold_read hit@10" in text and f"consolidated against hot: {ratio}" in text
    assert f"read back after it: {run_cost['prewarm']['pages']} pages" in text
    assert f"{warm['passes']} more passes (warm)" in text and "gold facts ranked as in the first pass: True" in text
    paired = report["paired"]
    assert paired["rounds"] == tier_bench.PAIRED_ROUNDS and set(paired["sizes"]) == {"150", "300"}
    for figures in paired["sizes"].values():
        assert figures["hit10"]["min"] > 0
        for spread in figures.values():
            assert 0 < spread["min"] <= spread["median"] <= spread["max"]
    assert set(paired["over_previous"]) == {"300"} and paired["over_previous"]["300"]["against"] == 150
    for key in ("postgres", "services_and_postgres", "p95"):
        ratio_spread = paired["over_previous"]["300"][key]
        assert 0 < ratio_spread["min"] <= ratio_spread["median"] <= ratio_spread["max"]
    assert f"300 over 150, round by round: Postgres CPU {paired['over_previous']['300']['postgres']['median']}" in text


INDEX = """
SELECT pg_get_indexdef(to_regclass('facts_embedding_hnsw')),
       (SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('facts_embedding_hnsw'))
"""
NEAREST = "SELECT text FROM facts ORDER BY embedding <=> (SELECT embedding FROM facts WHERE id = %s) LIMIT 1"


async def test_a_load_with_the_vector_index_built_after_leaves_the_migrations_index(
        handlers: Handlers, embedder: MiniLM) -> None:
    history = OrgHistory(40, SHAPE)
    scope_id = await _scope(handlers, "org-index-after")
    [before] = await (await handlers.conn.execute(INDEX)).fetchall()
    async with org_load.vectors_indexed_after(handlers.conn):
        ids = await load_history(handlers.conn, scope_id, history, embedder)
        assert (await (await handlers.conn.execute(INDEX)).fetchone()) == (None, None)  # no row-by-row graph inserts
    assert (await (await handlers.conn.execute(INDEX)).fetchone()) == before
    assert before[0] is not None and before[1] is True
    await handlers.conn.execute("SET LOCAL enable_seqscan = off")
    plan = "\n".join(r[0] for r in await (await handlers.conn.execute("EXPLAIN " + NEAREST, (ids[7],))).fetchall())
    assert "facts_embedding_hnsw" in plan
    assert await (await handlers.conn.execute(NEAREST, (ids[7],))).fetchone() == (history.facts[7].text,)


async def test_a_rebuilt_vector_index_that_differs_from_the_dropped_one_is_an_error(handlers: Handlers) -> None:
    await handlers.conn.execute("DROP INDEX facts_embedding_hnsw")
    await handlers.conn.execute(
        "CREATE INDEX facts_embedding_hnsw ON facts USING hnsw (embedding vector_cosine_ops) WITH (m = 8)")
    with pytest.raises(RuntimeError, match="differs from the migrations' one"):
        async with org_load.vectors_indexed_after(handlers.conn):
            pass
