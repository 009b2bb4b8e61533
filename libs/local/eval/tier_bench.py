"""`echo-memory benchmark-tiers`: does consolidation keep recall while it bounds what a search reads?

In a throw-away system: the agent-facts set is written through the real write path and then made
old and never read (the facts an organisation forgets it has), inside distractors loaded by COPY.
Two histories:

- `org` (the default): at each size a system of its own (its own Postgres) holding an
  organisation's year of memory (org_history.py: agents, projects, sessions, restated edges,
  look-alike names, a read log that favours recent facts of popular entities), loaded as
  `write_episode` stores it (org_load.py);
- `flat`: one scope growing from size to size with one agent's synthetic facts
  (libs/local/eval/bulk.py), ages spread over a year by a hash, a tenth of them ended versions,
  the newest read once.

At each size it measures four arms on the same queries:

- flat: exact cosine over every visible fact of the scope (the ceiling a vector search can reach);
- all: `query_memory` over every fact (`tier: "all"`, the deep search), before the run;
- hot: `query_memory` as it searches by default (`tier: "hot"`) after `consolidate` (hot facts
  plus the digests nearest the query and those holding its rarest words), once right after the run
  and its VACUUM (the store partly outside Postgres' cache), then WARM_PASSES times more (warm).
- hot_gold_read: the hot arm again once every gold fact was read a day ago and a run placed them
  hot: the same facts and questions in the other tier, so consolidated facts' recall can be set
  against hot facts' (the bar: at least 0.9 of it).

With the `org` history and several sizes, once every size is measured, the hot arm's questions are
asked on every size's system by turns (PAIRED_ROUNDS rounds): the comparison of sizes that the
machine's drift over minutes does not tilt.

It reports hit@10, recall@10 and MRR@10 with bootstrap intervals, the gold facts' tiers and how
many were reached through a digest, latency, CPU per query of this process (the services run
in-process) and of Postgres (the postmaster and every backend; background work such as autovacuum
falls in it too), tokens per recall, the session brief's latency over the bus, the cost of the consolidation
run, and the invariants that must hold at 100%: the facts' content unchanged by the run, `as_of`
answers for a past instant unchanged, a rebuild giving identical digests; with the `org` history
also the false-merge probe (no topic digest, and no digest of a look-alike entity, holds facts about
two distinct look-alikes; entity digests of a third entity that name two look-alikes side by side
are counted apart) and the contradiction probe (no digest holds a fact and the version that ended it).
"""

from __future__ import annotations

import hashlib
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import psutil
import psycopg
from pgvector.psycopg import register_vector_async

from echo_memory.libs.core.config.retrieval import RetrievalSettings
from echo_memory.libs.local.eval import agent_facts, synthetic
from echo_memory.libs.local.eval.bulk import copy_facts
from echo_memory.libs.local.eval.concurrency import run_process_cpu_seconds, tree_cpu_seconds
from echo_memory.libs.local.eval.metrics import (
    hit_at,
    latency_stats,
    percentile,
    recall_at,
    reciprocal_rank,
    returned_tokens,
)
from echo_memory.libs.local.eval.org_history import OrgHistory
from echo_memory.libs.local.eval.org_load import load_history, load_reads, vectors_indexed_after
from echo_memory.libs.local.eval.runner import new_scope, progress, summary, write_agent_facts
from echo_memory.libs.local.eval.system import stack_call, throwaway_stack
from echo_memory.libs.local.eval.vector_cache import VectorCache
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.embed.minilm import MODEL_SHA256

GOLD_AGE_DAYS = 300
ENDED_SHARE = 10  # one distractor in ten is an ended version
AS_OF_QUERIES = 10
BRIEFS = 30
# The first hot pass after a run reads part of the store from outside Postgres' cache; the passes
# after it show a query's cost on a warm store, by pass so their spread shows too.
WARM_PASSES = 3
# Passes of the default search by turns on every size's system, after every size was measured.
PAIRED_ROUNDS = 8
RUN_TIMEOUT_S = 4 * 3600.0  # a run over a million facts outlasts the bulk timeout (600 s)

# A hash of each row's hash: the rows themselves joined (vectors as text, ~4 KB a fact) pass
# Postgres' 1 GB limit on one string at ~250k facts.
CONTENT_HASH = """
SELECT md5(string_agg(md5(concat_ws('|', id, source_entity, target_entity, relation, text, t_valid, t_invalid,
       supersedes, written_at, embedding::text)), '' ORDER BY id)) FROM facts WHERE scope_id = %(scope_id)s
"""
SCOPE_ID = "SELECT id FROM scopes WHERE name = %(name)s"
FACTS_IN_DATABASE = "SELECT count(*) FROM facts"  # every scope's: what the measured search shares its indexes with
AGE_GOLD = """
UPDATE facts SET written_at = now() - make_interval(days => %(days)s), t_valid = now() - make_interval(days => %(days)s)
WHERE scope_id = %(scope_id)s AND id = ANY(%(ids)s::uuid[])
"""
# Distractors not yet shaped: ages spread over a year by a hash of the id (the same store always gets
# the same history), every ENDED_SHARE-th one an ended version, and the newest ones read once.
SHAPE_HISTORY = """
WITH fresh AS (
    SELECT id, ('x' || substr(md5(id::text), 1, 8))::bit(32)::int & 2147483647 AS h
    FROM facts WHERE scope_id = %(scope_id)s AND agent_id = 'benchmark-bulk' AND written_at > now() - interval '1 hour'
)
UPDATE facts f SET written_at = now() - make_interval(days => fresh.h %% 365),
                   t_valid = now() - make_interval(days => fresh.h %% 365),
                   t_invalid = CASE WHEN fresh.h %% %(ended)s = 0 THEN now() - make_interval(days => (fresh.h %% 365) / 2)
                               END
FROM fresh WHERE f.id = fresh.id
"""
LOG_READS = """
WITH r AS (
    INSERT INTO reads (agent_id, query, scopes, tokens, created_at)
    VALUES ('benchmark-reader', 'recent work', ARRAY[%(scope)s], 0, now() - interval '1 day') RETURNING id
)
INSERT INTO read_results (read_id, item_id, item_kind, rank, score)
SELECT r.id, f.id, 'fact', row_number() OVER (ORDER BY f.written_at DESC, f.id), 0.5
FROM r, (SELECT id, written_at FROM facts
         WHERE scope_id = %(scope_id)s AND agent_id = 'benchmark-bulk' AND written_at > now() - interval '14 days'
           AND t_invalid IS NULL
         ORDER BY written_at DESC, id LIMIT %(reads)s) f
"""
BACKDATE_OWN_READS = "UPDATE reads SET created_at = now() - interval '400 days' WHERE agent_id = 'admin'"
# Every gold fact returned by one read a day ago: the policy then holds them hot ("recent_read"),
# so the same questions measure the same facts in the hot tier.
READ_GOLD_LATELY = """
WITH r AS (
    INSERT INTO reads (agent_id, query, scopes, tokens, created_at)
    VALUES ('benchmark-reader', 'the gold facts', ARRAY[%(scope)s], 0, now() - interval '1 day') RETURNING id
)
INSERT INTO read_results (read_id, item_id, item_kind, rank, score)
SELECT r.id, g.id, 'fact', g.rank, 0.5 FROM r, unnest(%(ids)s::uuid[]) WITH ORDINALITY AS g(id, rank)
"""
FLAT_TOP = """
SELECT id::text FROM facts
WHERE scope_id = %(scope_id)s AND t_valid <= now() AND (t_invalid IS NULL OR t_invalid > now())
ORDER BY (embedding <=> %(embedding)s) + 0, id
LIMIT 10
"""
GOLD_TIERS = """
SELECT f.id::text, coalesce(ft.tier, 'hot') FROM facts f LEFT JOIN fact_tiers ft ON ft.fact_id = f.id
WHERE f.id = ANY(%(ids)s::uuid[])
"""
DIGEST_NAMES = """
SELECT d.kind, (SELECT name FROM entities WHERE id = d.subject_id), array_agg(DISTINCT e.name)
FROM digests d JOIN facts f ON f.id = ANY(d.member_ids) JOIN entities e ON e.id IN (f.source_entity, f.target_entity)
WHERE d.scope_id = %(scope_id)s AND d.valid_to IS NULL GROUP BY d.id, d.kind, d.subject_id
"""
# Topics an area holds: the brief quotes those through their area, so they are not top nodes.
TOPICS_IN_AREAS = """
SELECT coalesce(sum(cardinality(parts)), 0) FROM digests
WHERE scope_id = %(scope_id)s AND valid_to IS NULL AND kind = 'area'
"""
DIGESTS_WITH_BOTH_VERSIONS = """
SELECT count(*) FROM digests d WHERE d.scope_id = %(scope_id)s AND d.valid_to IS NULL
AND EXISTS (SELECT 1 FROM facts f WHERE f.id = ANY(d.member_ids) AND f.supersedes = ANY(d.member_ids))
"""
READS_PER_FACT = 10  # an org's read log: one recall (of up to five facts) for every ten facts written
DIGESTS = """
SELECT subject_id::text, member_hash, summary, embedding::text, parts::text FROM digests
WHERE scope_id = %(scope_id)s AND valid_to IS NULL ORDER BY subject_id
"""


# The current topics nearest a query, in exact order: what a hot search's route by meaning (which
# walks the digests' HNSW index) aims to expand. It expands topics only; entity digests are reached
# by the query's words, and areas not at all.
NEAREST_DIGESTS = """
SELECT member_ids::text[] FROM digests
WHERE scope_id = %(scope_id)s AND valid_to IS NULL AND kind = 'topic'
ORDER BY embedding <=> %(embedding)s, id
LIMIT %(digests)s
"""
IN_A_DIGEST = "SELECT DISTINCT unnest(member_ids)::text FROM digests WHERE scope_id = %(scope_id)s AND valid_to IS NULL"


def _digest(rows: list[Any]) -> str:
    return hashlib.sha256(repr(rows).encode()).hexdigest()


HISTORIES = ("org", "flat")


async def run(path: str | Path, sizes: list[int], *, history: str = "org", show: bool = False,
              vector_cache: Path | None = None) -> dict[str, Any]:
    """The report: one row per size (`org`: a system of its own per size; `flat`: one growing store).

    `vector_cache`: a directory where the `org` history's fact vectors are kept between runs
    (vector_cache.py); a size whose vectors are there loads without the model. With the `org`
    history and more than one size, `paired` holds the default search's cost on every size's system
    by turns (_paired_passes).
    """
    data = agent_facts.load(path)
    embedder = MiniLM()
    cache = None if vector_cache is None else VectorCache(vector_cache, f"{embedder.name}@{MODEL_SHA256}")
    rows: list[dict[str, Any]] = []
    paired: dict[str, Any] | None = None
    # Each size of the org history in a system of its own, every system up until the paired passes
    # end: the hot tier's indexes serve every scope of a database, so a size measured beside
    # another's store would walk that store's rows too.
    async with AsyncExitStack() as systems:
        if history == "org":
            measured: list[SizeSystem] = []
            for size in sorted(sizes):
                stack = await systems.enter_async_context(throwaway_stack(embedder))
                call = stack_call(stack, timeout=RUN_TIMEOUT_S)
                scope = await new_scope(call, f"org-{size}")
                by_id = await _plant_gold(call, stack.database_url, scope, data, show)
                org = await load_org(stack.database_url, scope, size, embedder, show, cache)
                rows.append(await _measure(call, stack.database_url, scope, data, by_id, embedder, size, show,
                                           org=org))
                measured.append(SizeSystem(size, call, stack.database_url, scope, by_id))
            if len(measured) > 1:
                paired = await _paired_passes(measured, data, show)
        else:
            stack = await systems.enter_async_context(throwaway_stack(embedder))
            call = stack_call(stack, timeout=RUN_TIMEOUT_S)
            scope = await new_scope(call, "tiers")
            by_id = await _plant_gold(call, stack.database_url, scope, data, show)
            source = synthetic.FactSource()
            stored = 0
            for size in sorted(sizes):
                stored += await copy_facts(stack.database_url, scope, source, max(0, size - stored), embedder,
                                           progress=_progress(size) if show else None)
                rows.append(await _measure(call, stack.database_url, scope, data, by_id, embedder, stored, show))
    return {"dataset": "agent-facts", "gold_facts": len(data.facts), "queries": len(data.queries),
            "gold_age_days": GOLD_AGE_DAYS, "history": history, "rows": rows,
            **({"paired": paired} if paired is not None else {})}


@dataclass(frozen=True)
class SizeSystem:
    """One size's system once measured: where its default search is asked."""

    size: int
    call: Any
    database_url: str
    scope: str
    by_id: dict[str, str]


async def _plant_gold(call: Any, database_url: str, scope: str, data: agent_facts.AgentFacts,
                      show: bool) -> dict[str, str]:
    """The gold facts through the write path, then dated GOLD_AGE_DAYS back; fact id -> dataset id."""
    by_id = await write_agent_facts(call, scope, data, show)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        scope_id = (await (await conn.execute(SCOPE_ID, {"name": scope})).fetchone())[0]  # type: ignore[index]
        await conn.execute(AGE_GOLD, {"scope_id": scope_id, "ids": list(by_id), "days": GOLD_AGE_DAYS})
    return by_id


async def load_org(database_url: str, scope: str, size: int, embedder: MiniLM, show: bool,
                    cache: VectorCache | None = None) -> dict[str, Any]:
    """An organisation's history of `size` facts and its read log, in one transaction; what it cost.

    The facts' vector index is rebuilt once at the end of the load rather than grown row by row
    (org_load.vectors_indexed_after): the benchmark's database serves nothing else meanwhile.
    """
    cpu, started = time.process_time(), time.perf_counter()
    org = OrgHistory(size)
    cached = cache is not None and cache.path_for([f.text for f in org.facts]).exists()
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        scope_id = str((await (await conn.execute(SCOPE_ID, {"name": scope})).fetchone())[0])  # type: ignore[index]
        postgres = await _postmaster(conn)
        pg_cpu = tree_cpu_seconds(postgres)
        async with vectors_indexed_after(conn):  # the benchmark's database is its own: build the graph once
            ids = await load_history(conn, scope_id, org, embedder, progress=_progress(size) if show else None,
                                     cache=cache)
        results = await load_reads(conn, scope, ids, org.reads(max(1, size // READS_PER_FACT)))
        await conn.commit()
        await conn.set_autocommit(True)
        # As autovacuum would shortly after a bulk load. The lexical statistics too: without them the
        # planner took a scope's terms for one row and read every term of the scope on each query.
        for table in ("facts", "entities", "episodes", "reads", "read_results", "lexical_df", "lexical_stats"):
            await conn.execute(f"VACUUM ANALYZE {table}")
        pg_cpu = tree_cpu_seconds(postgres) - pg_cpu
    _phase(show, size, f"loaded: {time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} s CPU "
                       f"of this process, {pg_cpu:.0f} s of Postgres, vectors {'cached' if cached else 'computed'}")
    busiest = Counter(f.project for f in org.facts).most_common(1)[0][0] if org.facts else None
    return {"look_alikes": org.look_alikes, "project": busiest, "load": {
        "wall_s": round(time.perf_counter() - started, 1), "process_cpu_s": round(time.process_time() - cpu, 1),
        "postgres_cpu_s": round(pg_cpu, 1), "vectors": "cached" if cached else "computed",
        "superseded": len(org.successors()), "read_results": results,
        "agents": len({f.agent for f in org.facts}), "projects": len({f.project for f in org.facts})}}


def _phase(show: bool, size: int, text: str) -> None:
    """A line on stderr as each step of a size ends: a run at a million facts takes hours."""
    if show:
        print(f"{time.strftime('%H:%M:%S')} [{size}] {text}", file=sys.stderr, flush=True)


def _progress(size: int) -> Callable[[int], None]:
    def show(done: int) -> None:
        progress(f"distractors to {size}", done, size)

    return show


async def _measure(call: Any, database_url: str, scope: str, data: agent_facts.AgentFacts, by_id: dict[str, str],
                   embedder: MiniLM, distractors: int, show: bool, org: dict[str, Any] | None = None) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await register_vector_async(conn)
        scope_id = (await (await conn.execute(SCOPE_ID, {"name": scope})).fetchone())[0]  # type: ignore[index]
        if org is None:  # the flat history is shaped here; an org history arrives with its ages and reads
            await conn.execute(SHAPE_HISTORY, {"scope_id": scope_id, "ended": ENDED_SHARE})
            await conn.execute(LOG_READS, {"scope_id": scope_id, "scope": scope, "reads": max(10, distractors // 50)})
            await conn.execute("VACUUM ANALYZE facts")
        content_before = (await (await conn.execute(CONTENT_HASH, {"scope_id": scope_id})).fetchone())[0]  # type: ignore[index]
        in_database = (await (await conn.execute(FACTS_IN_DATABASE)).fetchone())[0]  # type: ignore[index]
        instant = int(time.time()) - 30 * 86400  # one past instant for both sides of the invariant
        past, as_of_ms = await _as_of_answers(call, scope, data, instant)
        # Asked twice before anything moves: a difference here is the search's own, not consolidation's.
        repeatable = past == (await _as_of_answers(call, scope, data, instant))[0]
        flat = [await _flat(conn, scope_id, embedder, text, by_id) for _, text, _, _ in data.queries]
        postgres = await _postmaster(conn)
        every, pg_all_ms = await _arm_with_postgres(call, scope, data, by_id, "all", postgres)
        # The benchmark's own queries are in the read log too; dated a year back, they are not the
        # activity that keeps a fact hot, so the gold facts stay never read as far as the policy sees.
        await conn.execute(BACKDATE_OWN_READS)
        cpu, started, pg_cpu = time.process_time(), time.perf_counter(), tree_cpu_seconds(postgres)
        run_cpu = run_process_cpu_seconds()
        _phase(show, distractors, "searched before the run (as_of, flat, every tier)")
        result = await call("consolidation", "consolidate", {"scope": scope})
        cost = {"wall_s": round(time.perf_counter() - started, 2), "process_cpu_s": round(time.process_time() - cpu, 2),
                "run_process_cpu_s": round(run_process_cpu_seconds() - run_cpu, 2),
                "postgres_cpu_s": round(tree_cpu_seconds(postgres) - pg_cpu, 2), "counts": result["runs"][0]["counts"],
                "prewarm": result["runs"][0]["prewarm"]}
        cost["vacuum_after"] = await _vacuum_after_run(conn, postgres)
        _phase(show, distractors, f"consolidated: {cost['wall_s']} s wall, {cost['process_cpu_s']} s CPU of this "
                                  f"process, {cost['run_process_cpu_s']} s of the run's, {cost['postgres_cpu_s']} s of Postgres")
        run_id = result["runs"][0]["run_id"]
        hot, pg_hot_ms = await _arm_with_postgres(call, scope, data, by_id, "hot", postgres)
        warm = await _warm_passes(call, scope, data, by_id, postgres, hot)
        brief = await _brief_latency(call, scope)
        brief_project = await _brief_latency(call, scope, org["project"]) if org and org["project"] else None
        content_after = (await (await conn.execute(CONTENT_HASH, {"scope_id": scope_id})).fetchone())[0]  # type: ignore[index]
        tiers = await _gold_tiers(conn, by_id)
        reach = await _digest_reach(conn, scope_id, data, by_id, embedder)
        probes = await _probes(conn, scope_id, org["look_alikes"]) if org is not None else None
        digests_before = _digest(await (await conn.execute(DIGESTS, {"scope_id": scope_id})).fetchall())
        _phase(show, distractors, "searched after the run (hot, brief, reach, probes); undoing and rebuilding")
        await call("consolidation", "consolidate_undo", {"run_id": run_id})
        await call("consolidation", "consolidate", {"scope": scope})
        digests_rebuilt = _digest(await (await conn.execute(DIGESTS, {"scope_id": scope_id})).fetchall())
        _phase(show, distractors, "rebuilt; reading the gold facts lately and running again")
        read_lately = await _gold_read_lately(call, conn, scope, data, by_id, postgres)
    past_after, _ = await _as_of_answers(call, scope, data, instant)
    gold_tiers: dict[str, int] = {}
    for tier in tiers.values():
        gold_tiers[tier] = gold_tiers.get(tier, 0) + 1
    row = {
        "distractors": distractors, "facts_in_database": in_database, "consolidation": cost, "gold_tiers": gold_tiers,
        "brief_ms": brief,
        **({"brief_project_ms": brief_project} if brief_project else {}),
        "as_of_ms": latency_stats(as_of_ms),
        **({"org": org["load"], "probes": probes} if org is not None else {}),
        "arms": {"flat": _scores([(ids, [], 0.0, 0, 0.0) for ids in flat], data),
                 "all": {**_scores(every, data), "postgres_cpu_ms_per_query": round(pg_all_ms, 2)},
                 "hot": {**_scores(hot, data), "postgres_cpu_ms_per_query": round(pg_hot_ms, 2)},
                 "hot_gold_read": {**_scores(read_lately.answers, data),
                                   "postgres_cpu_ms_per_query": round(read_lately.postgres_cpu_ms, 2)}},
        "hot_warm": warm,
        "hot_by_gold_tier": _by_tier(hot, data, by_id, tiers),
        "hot_gold_read_by_gold_tier": _by_tier(read_lately.answers, data, by_id, read_lately.tiers),
        "consolidated_against_hot": _tier_ratio(hot, tiers, read_lately, data, by_id), "digest_reach": reach,
        "invariants": {"content_unchanged": content_before == content_after, "as_of_unchanged": past == past_after,
                       "as_of_answers_changed": sum(a != b for a, b in zip(past, past_after, strict=True)),
                       "as_of_repeatable_before_the_run": repeatable,
                       "rebuild_identical": digests_before == digests_rebuilt},
    }
    if show:
        print(render_row(row), file=sys.stderr, flush=True)  # the whole report goes to stdout at the end
    return row


async def _probes(conn: psycopg.AsyncConnection, scope_id: Any, look_alikes: list[tuple[str, ...]]) -> dict[str, Any]:
    """False merges and merged contradictions among the current digests (each must be 0), entity
    digests of a third entity naming two look-alikes side by side (not a merge; reported), the
    digests of each kind, and the top nodes (digests less the topics an area holds)."""
    group_of = {name: index for index, group in enumerate(look_alikes) for name in group}
    mixed_topic = mixed_area = mixed_subject = side_by_side = 0
    rows = await (await conn.execute(DIGEST_NAMES, {"scope_id": scope_id})).fetchall()
    kinds = Counter(kind for kind, _, _ in rows)
    for kind, subject, names in rows:
        groups = [group_of[n] for n in names if n in group_of]
        if len(groups) == len(set(groups)):
            continue
        if kind == "topic":
            mixed_topic += 1
        elif kind == "area":
            mixed_area += 1
        elif subject in group_of and groups.count(group_of[subject]) > 1:
            mixed_subject += 1
        else:
            side_by_side += 1
    both = (await (await conn.execute(DIGESTS_WITH_BOTH_VERSIONS, {"scope_id": scope_id})).fetchone())[0]  # type: ignore[index]
    held = (await (await conn.execute(TOPICS_IN_AREAS, {"scope_id": scope_id})).fetchone())[0]  # type: ignore[index]
    return {"digests": len(rows), "by_kind": dict(sorted(kinds.items())), "top_nodes": len(rows) - int(held),
            "topic_digests_mixing_look_alikes": mixed_topic, "area_digests_mixing_look_alikes": mixed_area,
            "look_alike_digests_holding_another": mixed_subject, "digests_holding_a_fact_and_its_successor": int(both),
            "entity_digests_naming_look_alikes_side_by_side": side_by_side}


async def _postmaster(conn: psycopg.AsyncConnection) -> psutil.Process:
    """The postmaster serving `conn` (the parent of its backend)."""
    backend = (await (await conn.execute("SELECT pg_backend_pid()")).fetchone())[0]  # type: ignore[index]
    parent = psutil.Process(backend).parent()
    if parent is None:
        raise RuntimeError("cannot find the postmaster of the benchmark's database")
    return parent


# What a run writes: a tier row per moved fact, its tier moves, the new digest versions, and the
# hot tier's copies it adds, the waiting rows it takes and the hot edges its moves take out (the
# facts table is only read).
RUN_TABLES = ("fact_tiers", "digests", "tier_moves", "hot_facts", "hot_pending", "hot_edges")
ALL_VISIBLE = "SELECT relallvisible::float / greatest(relpages, 1) FROM pg_class WHERE relname = %(table)s"


async def _vacuum_after_run(conn: psycopg.AsyncConnection, postgres: psutil.Process) -> dict[str, float]:
    """VACUUM ANALYZE what the run wrote, as autovacuum would within a minute or two of it; its cost,
    and the share of the digests' pages marked all-visible (the brief's index-only scans need it).

    Done before the hot arm and the brief are measured, so they are not timed beside it: measured
    while autovacuum worked off a 100k run, the brief took 12.6 ms at p50 against 6-8 ms after.
    The benchmark's Postgres commits asynchronously, and VACUUM marks a page all-visible only once
    the commits of its rows are on disk, which a durable server's are at once: a CHECKPOINT puts
    them there, then a second VACUUM marks the pages (without it none were, and counting the
    digests for the brief read the heap: 2-3 ms more at 100k).
    """
    started, pg_cpu = time.perf_counter(), tree_cpu_seconds(postgres)
    for table in RUN_TABLES:
        await conn.execute(f"VACUUM ANALYZE {table}")
    await conn.execute("CHECKPOINT")
    for table in RUN_TABLES:
        await conn.execute(f"VACUUM {table}")
    row = await (await conn.execute(ALL_VISIBLE, {"table": "digests"})).fetchone()
    return {"wall_s": round(time.perf_counter() - started, 2), "postgres_cpu_s": round(tree_cpu_seconds(postgres) - pg_cpu, 2),
            "digests_all_visible": round(float(row[0]) if row else 0.0, 3)}


async def _flat(conn: psycopg.AsyncConnection, scope_id: Any, embedder: MiniLM, text: str,
                by_id: dict[str, str]) -> list[str]:
    vector = embedder.embed_one(text)
    rows = await (await conn.execute(FLAT_TOP, {"scope_id": scope_id, "embedding": vector}, prepare=False)).fetchall()
    return [by_id.get(r[0], "?") for r in rows]


Answer = tuple[list[str], list[list[str]], float, int, float]  # ranked ids, matched, ms, tokens, cpu ms


async def _arm(call: Any, scope: str, data: agent_facts.AgentFacts, by_id: dict[str, str], tier: str) -> list[Answer]:
    out: list[Answer] = []
    for _, text, _, _ in data.queries:
        cpu, started = time.process_time(), time.perf_counter()
        result = await call("retrieval", "query_memory", {"query": text, "scope": scope, "top_k": 10, "tier": tier,
                                                          "include_episodes": False})
        elapsed, cpu_ms = (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000
        items = result["results"]
        out.append(([by_id.get(i["id"], "?") for i in items], [i["matched"] for i in items], elapsed,
                    int(returned_tokens(items)), cpu_ms))
    return out


async def _arm_with_postgres(call: Any, scope: str, data: agent_facts.AgentFacts, by_id: dict[str, str], tier: str,
                             postgres: psutil.Process) -> tuple[list[Answer], float]:
    """The arm's answers and the CPU milliseconds Postgres spent a query meanwhile."""
    pg_cpu = tree_cpu_seconds(postgres)
    answers = await _arm(call, scope, data, by_id, tier)
    return answers, (tree_cpu_seconds(postgres) - pg_cpu) * 1000 / len(data.queries)


async def _warm_passes(call: Any, scope: str, data: agent_facts.AgentFacts, by_id: dict[str, str],
                       postgres: psutil.Process, first: list[Answer]) -> dict[str, Any]:
    """The hot arm's questions asked WARM_PASSES more times after its first pass, on the same store:
    CPU a query of this process and of Postgres by pass (median, min, max), p50/p95 over every
    answer of these passes, and whether every pass put each question's gold facts at the ranks
    the first pass did."""
    passes = [await _arm_with_postgres(call, scope, data, by_id, "hot", postgres) for _ in range(WARM_PASSES)]
    latencies = [answer[2] for answers, _ in passes for answer in answers]
    return {"passes": WARM_PASSES,
            "postgres_cpu_ms_per_query": _spread([postgres_ms for _, postgres_ms in passes]),
            "process_cpu_ms_per_query": _spread([_process_cpu_ms(answers) for answers, _ in passes]),
            "latency_ms": _p50_p95(latencies),
            "same_gold_ranks": all([a[0] for a in answers] == [a[0] for a in first] for answers, _ in passes)}


@dataclass(frozen=True)
class PassCost:
    """One pass of the default search over the questions: CPU a query, its p95 and hit@10."""

    process_cpu_ms: float
    postgres_cpu_ms: float
    p95_ms: float
    hit10: float


async def _paired_passes(systems: list[SizeSystem], data: agent_facts.AgentFacts, show: bool) -> dict[str, Any]:
    """The default search's cost on every size's system by turns, once every size was measured: a
    pass each to warm up, then PAIRED_ROUNDS rounds of one pass a size, the order reversed every
    other round, so what drifts on the machine over minutes falls on every size alike (sizes each
    timed in a stretch of their own differed by 5-10% from that alone). The stores are as their
    last step left them (the gold facts read lately and placed hot).

    Per size, by round (median, min, max): CPU a query of the services and of Postgres, p95 and
    hit@10. Per size after the first, its figures over the size before it, round by round.
    """
    postmasters: dict[int, psutil.Process] = {}
    for system in systems:
        async with await psycopg.AsyncConnection.connect(system.database_url) as conn:
            postmasters[system.size] = await _postmaster(conn)
    for system in systems:
        await _arm(system.call, system.scope, data, system.by_id, "hot")
    passes: dict[int, list[PassCost]] = {system.size: [] for system in systems}
    for turn in range(PAIRED_ROUNDS):
        for system in systems if turn % 2 == 0 else systems[::-1]:
            answers, postgres_ms = await _arm_with_postgres(system.call, system.scope, data, system.by_id, "hot",
                                                            postmasters[system.size])
            passes[system.size].append(PassCost(_process_cpu_ms(answers), postgres_ms,
                                                percentile([a[2] for a in answers], 95),
                                                _scores(answers, data)["quality"]["hit10"]))
    _phase(show, systems[-1].size, f"the default search on every size by turns, {PAIRED_ROUNDS} rounds")
    sizes = [system.size for system in systems]
    return {"rounds": PAIRED_ROUNDS,
            "sizes": {str(size): _pass_spreads(passes[size]) for size in sizes},
            "over_previous": {str(size): _ratios(passes[size], passes[previous], previous)
                              for previous, size in pairwise(sizes)}}


def _pass_spreads(passes: list[PassCost]) -> dict[str, dict[str, float]]:
    return {"process_cpu_ms_per_query": _spread([p.process_cpu_ms for p in passes]),
            "postgres_cpu_ms_per_query": _spread([p.postgres_cpu_ms for p in passes]),
            "p95_ms": _spread([p.p95_ms for p in passes]), "hit10": _spread([p.hit10 for p in passes])}


def _ratios(larger: list[PassCost], smaller: list[PassCost], against: int) -> dict[str, Any]:
    """`larger`'s passes over `smaller`'s, round by round (each pair ran minutes apart at most)."""
    pairs = list(zip(larger, smaller, strict=True))
    return {"against": against,
            "postgres": _spread([a.postgres_cpu_ms / b.postgres_cpu_ms for a, b in pairs], 3),
            "services_and_postgres": _spread([(a.process_cpu_ms + a.postgres_cpu_ms)
                                              / (b.process_cpu_ms + b.postgres_cpu_ms) for a, b in pairs], 3),
            "p95": _spread([a.p95_ms / b.p95_ms for a, b in pairs], 3)}


def _process_cpu_ms(answers: list[Answer]) -> float:
    return sum(answer[4] for answer in answers) / len(answers)


def _p50_p95(latencies: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(latencies, 50), 2), "p95": round(percentile(latencies, 95), 2)}


def _spread(values: list[float], digits: int = 2) -> dict[str, float]:
    return {"median": round(statistics.median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits)}


async def _gold_tiers(conn: psycopg.AsyncConnection, by_id: dict[str, str]) -> dict[str, str]:
    """Each gold fact's id -> its tier now."""
    return {r[0]: r[1] for r in await (await conn.execute(GOLD_TIERS, {"ids": list(by_id)})).fetchall()}


async def _brief_latency(call: Any, scope: str, project: str | None = None) -> dict[str, float]:
    """The session brief of the consolidated scope (for `project`, its busiest in an org history, as
    a session-start hook asks), over the bus: p50/p95 of BRIEFS calls after a warm-up."""
    times = []
    for attempt in range(BRIEFS + 3):
        started = time.perf_counter()
        result = await call("consolidation", "brief", {"scope": scope, **({"project": project} if project else {})})
        if attempt >= 3:
            times.append((time.perf_counter() - started) * 1000)
        if not result["items"]:
            raise RuntimeError(f"the brief of consolidated scope {scope} held no digest")
    return latency_stats(times)


async def _as_of_answers(call: Any, scope: str, data: agent_facts.AgentFacts,
                         instant: int) -> tuple[list[list[str]], list[float]]:
    """Rankings as of 30 days ago (before any gold fact was read or any run), which must not move,
    and each ask's milliseconds over the bus."""
    answers, times = [], []
    for _, text, _, _ in data.queries[:AS_OF_QUERIES]:
        started = time.perf_counter()
        result = await call("retrieval", "query_memory", {"query": text, "scope": scope, "top_k": 10,
                                                          "as_of": instant})
        times.append((time.perf_counter() - started) * 1000)
        answers.append([i["id"] for i in result["results"]])
    return answers, times


def _scores(answers: list[Answer], data: agent_facts.AgentFacts) -> dict[str, Any]:
    rows = [{"hit10": hit_at(ids, relevant, 10), "recall10": recall_at(ids, relevant, 10),
             "mrr10": reciprocal_rank(ids, relevant, 10)}
            for (ids, _, _, _, _), (_, _, relevant, _) in zip(answers, data.queries, strict=True)]
    out: dict[str, Any] = {"quality": summary(rows)}
    latencies = [a[2] for a in answers if a[2] > 0]
    if latencies:
        out["latency_ms"] = _p50_p95(latencies)
        out["process_cpu_ms_per_query"] = round(_process_cpu_ms(answers), 2)
        out["tokens_per_recall"] = round(sum(a[3] for a in answers) / len(answers), 1)
        out["via_digest_results"] = sum(m.count("via_digest") for a in answers for m in a[1])
    return out


async def _digest_reach(conn: psycopg.AsyncConnection, scope_id: Any, data: agent_facts.AgentFacts,
                        by_id: dict[str, str], embedder: MiniLM) -> dict[str, Any]:
    """Per relevant gold fact of each query: is it in a current digest at all, and in one of the
    `digests_expanded` topics nearest the query in exact order (the route by meaning cannot recover
    a fact whose topic it does not expand; the words' route may)."""
    expands = RetrievalSettings().digests_expanded
    fact_of = {dataset_id: fact_id for fact_id, dataset_id in by_id.items()}
    digested = {r[0] for r in await (await conn.execute(IN_A_DIGEST, {"scope_id": scope_id})).fetchall()}
    pairs = in_digest = expanded = 0
    for _, text, relevant, _ in data.queries:
        rows = await (await conn.execute(NEAREST_DIGESTS, {"scope_id": scope_id, "digests": expands,
                                                           "embedding": embedder.embed_one(text)})).fetchall()
        members = {m for r in rows for m in r[0]}
        for gold in relevant:
            pairs += 1
            in_digest += fact_of.get(gold) in digested
            expanded += fact_of.get(gold) in members
    return {"gold_pairs": pairs, "in_a_digest": round(in_digest / max(pairs, 1), 4),
            "in_an_expanded_digest": round(expanded / max(pairs, 1), 4), "digests_expanded": expands}


def _by_tier(answers: list[Answer], data: agent_facts.AgentFacts, by_id: dict[str, str],
             tiers: dict[str, str]) -> dict[str, dict[str, float]]:
    """recall@10 of the hot arm, counted per gold fact by the tier that fact was in."""
    tier_of = {dataset_id: tiers[fact_id] for fact_id, dataset_id in by_id.items() if fact_id in tiers}
    found: dict[str, list[float]] = {}
    for (ids, _, _, _, _), (_, _, relevant, _) in zip(answers, data.queries, strict=True):
        for gold in relevant:
            found.setdefault(tier_of.get(gold, "?"), []).append(1.0 if gold in ids[:10] else 0.0)
    return {tier: {"recall10": round(sum(v) / len(v), 4), "n": len(v)} for tier, v in sorted(found.items())}


@dataclass(frozen=True)
class ReadLately:
    """The hot arm again once every gold fact was read a day ago and a run placed it hot."""
    answers: list[Answer]
    tiers: dict[str, str]  # fact id -> tier after that run
    postgres_cpu_ms: float  # a query


async def _gold_read_lately(call: Any, conn: psycopg.AsyncConnection, scope: str, data: agent_facts.AgentFacts,
                            by_id: dict[str, str], postgres: psutil.Process) -> ReadLately:
    """Log one read of every gold fact, run, VACUUM as after the first run, and ask the questions again:
    the same facts, the same questions, the gold facts now in the hot tier. The benchmark's own reads
    since the first run are dated back first: those that returned a gold fact would hold it hot too."""
    await conn.execute(BACKDATE_OWN_READS)
    await conn.execute(READ_GOLD_LATELY, {"scope": scope, "ids": list(by_id)})
    await call("consolidation", "consolidate", {"scope": scope})
    await _vacuum_after_run(conn, postgres)
    tiers = await _gold_tiers(conn, by_id)
    answers, postgres_cpu_ms = await _arm_with_postgres(call, scope, data, by_id, "hot", postgres)
    return ReadLately(answers, tiers, postgres_cpu_ms)


def _tier_ratio(hot: list[Answer], tiers: dict[str, str], read_lately: ReadLately, data: agent_facts.AgentFacts,
                by_id: dict[str, str]) -> dict[str, float | int | None]:
    """recall@10 of the gold facts that were consolidated in the hot arm and hot once read, in each
    arm, and the first over the second (the bar: at least 0.9); `ratio` None when no gold fact
    moved so or none was found hot."""
    moved = {dataset_id for fact_id, dataset_id in by_id.items()
             if tiers.get(fact_id) == "consolidated" and read_lately.tiers.get(fact_id) == "hot"}
    found: tuple[list[float], list[float]] = ([], [])
    for before, after, (_, _, relevant, _) in zip(hot, read_lately.answers, data.queries, strict=True):
        for gold in relevant:
            if gold in moved:
                found[0].append(1.0 if gold in before[0][:10] else 0.0)
                found[1].append(1.0 if gold in after[0][:10] else 0.0)
    consolidated, hot_again = (round(sum(v) / len(v), 4) if v else None for v in found)
    ratio = round(consolidated / hot_again, 3) if consolidated is not None and hot_again else None
    return {"gold_pairs": len(found[0]), "consolidated_recall10": consolidated, "hot_recall10": hot_again,
            "ratio": ratio}


def render_row(row: dict[str, Any]) -> str:
    lines = [f"distractors {row['distractors']} ({row['facts_in_database']} facts in the database): "
             f"gold tiers {row['gold_tiers']}; consolidation "
             f"{row['consolidation']['wall_s']} s wall, {row['consolidation']['process_cpu_s']} s CPU of this process, "
             f"{row['consolidation']['postgres_cpu_s']} s of Postgres, then VACUUM ANALYZE "
             f"{row['consolidation']['vacuum_after']['wall_s']} s wall (digests' pages all-visible: "
             f"{row['consolidation']['vacuum_after']['digests_all_visible']}); read back after it: "
             f"{_prewarmed(row['consolidation']['prewarm'])}; "
             f"brief over the bus p50 {row['brief_ms']['p50']} ms, p95 {row['brief_ms']['p95']} ms"
             + (f" (for its busiest project p50 {row['brief_project_ms']['p50']} ms, p95 "
                f"{row['brief_project_ms']['p95']} ms)" if "brief_project_ms" in row else "") + "; "
             f"as_of (exact) p50 {row['as_of_ms']['p50']} ms, p95 {row['as_of_ms']['p95']} ms"]
    for arm, figures in row["arms"].items():
        q = figures["quality"]
        line = (f"  {arm:<5} hit@10 {q['hit10']:.3f} [{q['hit10_ci95'][0]:.3f}, {q['hit10_ci95'][1]:.3f}]"
                f"  recall@10 {q['recall10']:.3f} [{q['recall10_ci95'][0]:.3f}, {q['recall10_ci95'][1]:.3f}]"
                f"  MRR@10 {q['mrr10']:.3f}")
        if "latency_ms" in figures:
            line += (f"  p50 {figures['latency_ms']['p50']} ms p95 {figures['latency_ms']['p95']} ms"
                     f"  CPU-ms {figures['process_cpu_ms_per_query']} services + "
                     f"{figures['postgres_cpu_ms_per_query']} Postgres  {figures['tokens_per_recall']} tokens"
                     f"  via digest {figures['via_digest_results']}")
        lines.append(line)
    warm = row["hot_warm"]
    lines.append(f"  hot arm, {warm['passes']} more passes (warm): CPU-ms a query by pass, median [min, max]: "
                 f"services {_spread_text(warm['process_cpu_ms_per_query'])} + Postgres "
                 f"{_spread_text(warm['postgres_cpu_ms_per_query'])}; p50 {warm['latency_ms']['p50']} ms "
                 f"p95 {warm['latency_ms']['p95']} ms; gold facts ranked as in the first pass: {warm['same_gold_ranks']}")
    lines.append(f"  hot arm recall@10 by gold tier: {row['hot_by_gold_tier']}; gold facts and digests: "
                 f"{row['digest_reach']}")
    lines.append(f"  hot arm once the gold facts were read lately, recall@10 by gold tier: "
                 f"{row['hot_gold_read_by_gold_tier']}; consolidated against hot: {row['consolidated_against_hot']}")
    lines.append(f"  invariants: {row['invariants']}")
    if "org" in row:
        lines.append(f"  org history: {row['org']}")
        lines.append(f"  probes: {row['probes']}")
    return "\n".join(lines)


def _spread_text(spread: dict[str, float]) -> str:
    return f"{spread['median']} [{spread['min']}, {spread['max']}]"


def _prewarmed(prewarm: dict[str, Any]) -> str:
    if prewarm["unavailable"]:
        return f"nothing ({prewarm['unavailable']})"
    return f"{prewarm['pages']} pages" + (f", {len(prewarm['skipped'])} relations left out" if prewarm["skipped"] else "")


def render(report: dict[str, Any]) -> str:
    head = (f"agent-facts ({report['gold_facts']} facts, {report['queries']} queries) planted {report['gold_age_days']} "
            f"days old and never read, inside synthetic distractors ({report.get('history', 'flat')} history)")
    return "\n".join([head, *(render_row(row) for row in report["rows"]),
                      *(_render_paired(report["paired"]) if "paired" in report else [])])


def _render_paired(paired: dict[str, Any]) -> list[str]:
    lines = [f"the default search on every size's system by turns ({paired['rounds']} rounds, the gold facts read "
             f"lately), by round, median [min, max]:"]
    for size, figures in paired["sizes"].items():
        lines.append(f"  {size}: CPU-ms a query services {_spread_text(figures['process_cpu_ms_per_query'])} + "
                     f"Postgres {_spread_text(figures['postgres_cpu_ms_per_query'])}; p95 "
                     f"{_spread_text(figures['p95_ms'])} ms; hit@10 {_spread_text(figures['hit10'])}")
    for size, ratio in paired["over_previous"].items():
        lines.append(f"  {size} over {ratio['against']}, round by round: Postgres CPU {_spread_text(ratio['postgres'])}, "
                     f"services + Postgres {_spread_text(ratio['services_and_postgres'])}, p95 "
                     f"{_spread_text(ratio['p95'])}")
    return lines
