"""SQL of the retrieval service. Every statement filters by scope (and validity) before ranking.

Validity is half-open: a fact is visible at time T when t_valid <= T < t_invalid (or t_invalid is
null); an episode is visible at T when it was written at or before T. The channel statements
return ids and scores only; `HYDRATE_*` fetches the full rows of the few results that survive
fusion, so a wide candidate pool costs little.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

# BM25 parameters, tuned on LoCoMo turns (k1 0.9, b 0.4 beat the textbook 1.2/0.75 by ~+0.02
# recall@10); changing them changes rankings, never the stored statistics.
BM25_K1 = 0.9
BM25_B = 0.4
# A query term whose document frequency is above this share of the corpus still adds to the
# score of candidates, but does not make candidates by itself: "the", a speaker's name on every
# turn, or "service" in a store of 100k service facts would otherwise pull in most of the corpus.
CANDIDATE_DF_SHARE = 0.2
# Candidate rows come from the rarest query terms until their document frequencies add up to
# this many postings (the rarest always counts). It bounds the lexical channel's work on large
# scopes (measured 897 ms → see lab/NOTES.md at 100k facts) and changes nothing on the dev
# sets, whose scopes are far smaller. Every matched term still scores candidates found this way.
CANDIDATE_POSTINGS = 2000
# Of the rows those terms match, BM25 scores the LEXICAL_CANDIDATES nearest the query's vector.
# Scoring means unnesting every candidate's tsvector, ~6 µs a row: at 100k facts a common rarest
# term matched ~1,400 rows and scoring took 10 of the lexical channel's 12 ms. A row that far
# from the query in meaning gains little from a lexical boost; on the dev sets (≤ 700 rows a
# scope) the cap rarely binds (see lab/NOTES.md). ts_rank as the pre-rank (no vector
# needed) was measured too: ~4.5 µs a row, 6 ms more at 100k facts.
LEXICAL_CANDIDATES = 300
# When the selected terms are on more rows than that together, candidates are the rows holding
# both of the two rarest terms (still the nearest LEXICAL_CANDIDATES), and only when no row holds
# both, the rows matching any selected term. BM25 ranks rows with two rare terms above rows with
# one, so those are the candidates it wants; the nearest-by-vector cut could drop them when their
# wording differed from the query's. At 100k synthetic facts the rarest term alone was on ~1,500
# rows and the pair on ~30: the statement went from ~10 to ~4 ms. Own-question MRR (synthetic
# store) +0.0065 at 10k facts, +0.0017 at 1k, unchanged at 100k; agent-facts and LoCoMo unchanged
# (lab/NOTES.md, "where the CPU of a query goes"). A corpus of at most LEXICAL_CANDIDATES rows cannot need it
# and runs the plain statement (planning the pair branch costs ~0.5 ms).

# A hot search reads the facts waiting for a run to enter the hot tier's indexes exactly, up to
# this many; above it (a store whose scope never ran), it filters the facts table's own indexes.
HOT_PENDING_EXACT = 2000

_FACT_COLUMNS = """
f.id, f.text, f.token_count, f.agent_id, f.tool, f.project, f.session_id, f.written_at,
f.t_valid, f.t_invalid, s.name AS scope_name, se.name AS source, te.name AS target, f.relation,
f.source_entity, f.target_entity, f.flags
"""

_VALID_AT = "f.t_valid <= %(at)s AND (f.t_invalid IS NULL OR f.t_invalid > %(at)s)"
_VISIBLE = f"""
f.scope_id = ANY(%(scope_ids)s)
AND {_VALID_AT}
"""
_VISIBLE_EPISODE = """
ep.scope_id = ANY(%(scope_ids)s) AND ep.kind <> 'write' AND ep.written_at <= %(at)s
"""

# Per corpus, from the statistics: how many rows the scopes read hold (picks exact scan or HNSW),
# the oldest format, how many scopes have statistics; and whether any row exists at all, so
# rows without statistics fall back to ts_rank instead of matching nothing (two index probes);
# and how many facts written since the last consolidation run wait outside the hot tier's indexes
# (counted up to one past HOT_PENDING_EXACT).
CORPUS_SIZES = f"""
SELECT c.corpus, coalesce(sum(ls.doc_count), 0)::bigint AS docs, min(ls.format_version) AS format_version,
       count(ls.scope_id) AS scopes_with_stats,
       CASE c.corpus
           WHEN 'facts' THEN EXISTS (SELECT 1 FROM facts f WHERE f.scope_id = ANY(%(scope_ids)s))
           ELSE EXISTS (SELECT 1 FROM episodes ep WHERE ep.scope_id = ANY(%(scope_ids)s) AND ep.kind <> 'write')
       END AS has_rows,
       CASE c.corpus WHEN 'facts' THEN
           (SELECT count(*) FROM (SELECT 1 FROM hot_pending p WHERE p.scope_id = ANY(%(scope_ids)s)
                                  LIMIT {HOT_PENDING_EXACT + 1}) AS waiting)
       ELSE 0 END AS hot_pending,
       c.corpus = 'facts' AND EXISTS (
           SELECT 1 FROM digests d WHERE d.scope_id = ANY(%(scope_ids)s) AND d.valid_to IS NULL) AS has_digests
FROM (VALUES ('facts'), ('episodes')) AS c(corpus)
LEFT JOIN lexical_stats ls ON ls.corpus = c.corpus AND ls.scope_id = ANY(%(scope_ids)s)
GROUP BY c.corpus
"""

# Exact scan: "+ 0" makes the ORDER BY an expression the HNSW index cannot serve, so the planner
# filters by scope and validity first and ranks every visible row exactly.
DENSE_FACTS_EXACT = f"""
SELECT f.id::text, 1 - (f.embedding <=> %(embedding)s) AS cos
FROM facts f
WHERE {_VISIBLE}
ORDER BY (f.embedding <=> %(embedding)s) + 0
LIMIT %(limit)s
"""
# HNSW: run after HNSW_SETTINGS, so pgvector keeps scanning the graph until `limit` rows pass
# the scope and validity filter (iterative scan, pgvector >= 0.8).
DENSE_FACTS_HNSW = f"""
SELECT f.id::text, 1 - (f.embedding <=> %(embedding)s) AS cos
FROM facts f
WHERE {_VISIBLE}
ORDER BY f.embedding <=> %(embedding)s
LIMIT %(limit)s
"""
DENSE_EPISODES_EXACT = f"""
SELECT ep.id::text, 1 - (ep.embedding <=> %(embedding)s) AS cos
FROM episodes ep
WHERE {_VISIBLE_EPISODE} AND ep.embedding IS NOT NULL
ORDER BY (ep.embedding <=> %(embedding)s) + 0
LIMIT %(limit)s
"""
DENSE_EPISODES_HNSW = f"""
SELECT ep.id::text, 1 - (ep.embedding <=> %(embedding)s) AS cos
FROM episodes ep
WHERE {_VISIBLE_EPISODE} AND ep.embedding IS NOT NULL
ORDER BY ep.embedding <=> %(embedding)s
LIMIT %(limit)s
"""
# `true` makes each setting local to the transaction, like SET LOCAL. They act on HNSW index
# scans only (the exact statements above cannot use the index), so query_memory sets them for
# every search, in the round trip that reads the corpus sizes, before it knows which path runs.
# ef_search 200: on an organisation's store the default search's hit@10 was 0.83 at 80, 0.87 at
# 200 and 0.89 at 400 against 0.89 for the exact scan (10k facts), 0.74 / 0.78 / 0.80 against 0.84
# at 100k; Postgres CPU per query at 10k 9.0 / 12.9 / 23.2 ms (docs/BENCHMARKS.md).
EF_SEARCH = 200
HNSW_SETTINGS = f"""
SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),
       set_config('hnsw.ef_search', '{EF_SEARCH}', true),
       set_config('hnsw.max_scan_tuples', '40000', true)
"""


def _bm25(table: str, alias: str, corpus: str, visible: str, *, pairs: bool, matching: Matching | None = None,
          recheck: bool = False) -> str:
    """BM25 over one corpus, from the per-scope statistics the write triggers maintain.

    `pairs`: the statement for corpora larger than LEXICAL_CANDIDATES, which draws candidates
    from the two rarest terms together when the selected terms are on more rows than it scores
    (see the constant).

    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)); tf = positions of the lexeme in the row's
    tsvector; document length = all positions (`tsv_length`, stored per row by migration 0005).
    Several scopes are read as one corpus (their counts are summed). `matching` says where the
    candidates come from (default: the table's own rows and lexical index); `recheck` applies
    `visible` to the returned rows too, for a source that could not check it itself.

    Besides the score, each row carries what the coordination and proximity boosts need: how
    many distinct query terms it matched (`matched`, of `terms` query terms the corpus knows),
    the positions of those terms in the row and in the query, and the terms' idf. Positions are
    only built for rows that matched two terms or more (proximity needs a pair), and the
    query-side columns only on the first row: decoding the same JSON on every row cost the
    service ~1 ms per query at top_k 50.

    Equal BM25 scores (common: short turns that share one query word) are ordered by distance to
    the query, then id. By id alone, which of them made the `limit` depended on the random ids an
    import drew, so two imports of the same conversation ranked differently.
    """
    also = f" AND {visible}" if recheck else ""
    return f"""
WITH {_query_terms(corpus)},
sel AS (
    SELECT string_agg(quote_literal(chosen.term), ' | ')::tsquery AS tsq, sum(chosen.df) AS postings
    FROM chosen
),
{_candidates(matching or _matching(table, alias, visible), pairs)}
-- Rank every candidate by BM25 alone, then fetch vectors and positions for the top rows only:
-- carrying embeddings and building JSON for every candidate dominated the query at 100k rows.
scored AS (
    SELECT c.id, c.dist,
           sum(idf.idf * (cardinality(u.positions) + (u.positions IS NULL)::int) * ({BM25_K1} + 1)
               / ((cardinality(u.positions) + (u.positions IS NULL)::int)
                  + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * c.tsv_length / greatest(st.avgdl, 1))))
               AS lex,
           count(*) AS matched
    FROM cand c
    CROSS JOIN st
    CROSS JOIN LATERAL unnest(c.tsv) AS u
    JOIN idf ON idf.term = u.lexeme
    GROUP BY c.id, c.dist
    ORDER BY lex DESC, c.dist, c.id
    LIMIT %(limit)s
)
SELECT s.id::text, s.lex,
       1 - s.dist AS cos,
       s.matched,
       (SELECT count(*) FROM idf) AS terms,
       CASE WHEN s.matched >= 2 THEN
           (SELECT jsonb_object_agg(u.lexeme, coalesce(u.positions::int[], '{{}}'))
              FROM unnest(s.tsv) AS u JOIN idf ON idf.term = u.lexeme) END AS doc_positions,
       CASE WHEN s.first THEN
           (SELECT jsonb_object_agg(q.term, coalesce(q.positions::int[], '{{}}')) FROM q) END AS query_positions,
       CASE WHEN s.first THEN (SELECT jsonb_object_agg(idf.term, idf.idf) FROM idf) END AS idfs
FROM (SELECT scored.*, {alias}.tsv, row_number() OVER (ORDER BY scored.lex DESC, scored.dist, scored.id) = 1 AS first
      FROM scored JOIN {table} {alias} ON {alias}.id = scored.id{also}) s
ORDER BY s.lex DESC, s.dist, s.id
"""


def _query_terms(corpus: str) -> str:
    """CTEs over one corpus' statistics: the query's terms (`q`), the corpus size and mean length
    (`st`), each known term's df, idf, rarity rank and running postings (`idf`), and the terms that
    make candidates (`chosen`: rare enough, up to CANDIDATE_POSTINGS postings, the rarest always)."""
    return f"""q AS (
    SELECT u.lexeme AS term, u.positions FROM unnest(echo_lexical(%(query)s)) AS u
),
st AS (
    SELECT coalesce(sum(doc_count), 0)::float8 AS n,
           coalesce(sum(total_length), 0)::float8 / greatest(coalesce(sum(doc_count), 0), 1) AS avgdl
    FROM lexical_stats WHERE scope_id = ANY(%(scope_ids)s) AND corpus = '{corpus}'
),
w AS (
    SELECT q.term, coalesce(sum(d.df), 0)::float8 AS df
    FROM q LEFT JOIN lexical_df d
      ON d.term = q.term AND d.corpus = '{corpus}' AND d.scope_id = ANY(%(scope_ids)s)
    GROUP BY q.term
),
idf AS (
    SELECT w.term, w.df, ln(1 + (st.n - w.df + 0.5) / (w.df + 0.5)) AS idf,
           row_number() OVER (ORDER BY w.df, w.term) AS rarity,
           sum(w.df) OVER (ORDER BY w.df, w.term) AS postings
    FROM w CROSS JOIN st WHERE w.df > 0
),
chosen AS (
    SELECT idf.term, idf.df, idf.idf FROM idf CROSS JOIN st
    WHERE (idf.df <= greatest(st.n * {CANDIDATE_DF_SHARE}, 1) OR idf.rarity <= 2)
      AND (idf.postings <= {CANDIDATE_POSTINGS} OR idf.rarity = 1)
)"""


# Builds the SELECT of the rows that match the tsquery in relation `rel` (`sel` or `pair`), the
# LEXICAL_CANDIDATES nearest the query's vector; `guard` is a condition put before the others.
Matching = Callable[[str, str], str]


def _table_rows(table: str, alias: str, visible: str, rel: str, guard: str = "") -> str:
    """Candidates from one table's own rows and lexical index (`_matching`)."""
    # The nearest rows by vector: a cosine costs far less than unnesting a tsvector, and less than
    # ts_rank (see LEXICAL_CANDIDATES).
    return f"""SELECT {alias}.id, {alias}.tsv, {alias}.tsv_length, {alias}.embedding <=> %(embedding)s AS dist
    FROM {table} {alias}, {rel}
    WHERE {guard}{visible} AND {alias}.tsv @@ {rel}.tsq
    ORDER BY dist, {alias}.id
    LIMIT {LEXICAL_CANDIDATES}"""


def _matching(table: str, alias: str, visible: str) -> Matching:
    """The candidates' source of a table's own statements."""
    return functools.partial(_table_rows, table, alias, visible)


def _candidates(matching: Matching, pairs: bool) -> str:
    """The `cand` CTE of `_bm25`: the rows BM25 scores (at most LEXICAL_CANDIDATES)."""
    if not pairs:
        return f"""cand AS (
    {matching("sel", "")}
),"""
    # The two rarest terms together when the selected terms are on more rows than are scored; the
    # selected terms (`sel`) when they are not, or when no row holds both.
    return f"""pair AS (
    SELECT string_agg(quote_literal(idf.term), ' & ')::tsquery AS tsq
    FROM idf WHERE idf.rarity <= 2
    HAVING count(*) = 2 AND (SELECT sel.postings FROM sel) > {LEXICAL_CANDIDATES}
),
cand_pair AS (
    {matching("pair", "")}
),
cand AS (
    SELECT * FROM cand_pair
    UNION ALL
    ({matching("sel", "NOT EXISTS (SELECT 1 FROM cand_pair) AND ")})
),"""


def _ts_rank(table: str, alias: str, visible: str) -> str:
    """The fallback when statistics are missing or stale: Postgres' own ts_rank over an OR query."""
    return f"""
WITH sel AS (
    SELECT string_agg(quote_literal(u.lexeme), ' | ')::tsquery AS tsq
    FROM unnest(echo_lexical(%(query)s)) AS u
)
SELECT {alias}.id::text, ts_rank({alias}.tsv, sel.tsq) AS lex, 1 - ({alias}.embedding <=> %(embedding)s) AS cos,
       0 AS matched, 0 AS terms, NULL::jsonb AS doc_positions, NULL::jsonb AS query_positions,
       NULL::jsonb AS idfs
FROM {table} {alias}, sel
WHERE {visible} AND {alias}.tsv @@ sel.tsq
ORDER BY lex DESC, cos DESC, {alias}.id
LIMIT %(limit)s
"""


LEXICAL_FACTS_BM25 = _bm25("facts", "f", "facts", _VISIBLE, pairs=False)
LEXICAL_FACTS_BM25_PAIRS = _bm25("facts", "f", "facts", _VISIBLE, pairs=True)
_EPISODES_SEARCHABLE = _VISIBLE_EPISODE + " AND ep.embedding IS NOT NULL"
LEXICAL_EPISODES_BM25 = _bm25("episodes", "ep", "episodes", _EPISODES_SEARCHABLE, pairs=False)
LEXICAL_EPISODES_BM25_PAIRS = _bm25("episodes", "ep", "episodes", _EPISODES_SEARCHABLE, pairs=True)
LEXICAL_FACTS_TS_RANK = _ts_rank("facts", "f", _VISIBLE)
# The same scores for given facts only (`ids`): the members a hot search reached through digests,
# which the lexical channel (hot facts only) never saw.
_VISIBLE_AMONG = _VISIBLE + "AND f.id = ANY(%(ids)s::uuid[])\n"
LEXICAL_MEMBERS_BM25 = _bm25("facts", "f", "facts", _VISIBLE_AMONG, pairs=False)
LEXICAL_MEMBERS_TS_RANK = _ts_rank("facts", "f", _VISIBLE_AMONG)
LEXICAL_EPISODES_TS_RANK = _ts_rank("episodes", "ep", _EPISODES_SEARCHABLE)

# Entities the query names: every 1–3 word n-gram of the query against names and aliases,
# exact and case-insensitive (served by the lower(name) indexes); a name of an entity a person
# merged into another names that other one, and an entity brings what it absorbed (migration 0015).
ENTITIES_NAMED = """
WITH named AS (
    SELECT e.id FROM entities e
    WHERE e.scope_id = ANY(%(scope_ids)s) AND lower(e.name) = ANY(%(grams)s)
    UNION
    SELECT a.entity_id FROM entity_aliases a
    WHERE a.scope_id = ANY(%(scope_ids)s) AND lower(a.alias) = ANY(%(grams)s)
), answering AS (
    SELECT coalesce(c.canonical_id, n.id) AS id
    FROM named n LEFT JOIN entity_canonical c ON c.entity_id = n.id AND c.scope_id = ANY(%(scope_ids)s)
)
SELECT id::text FROM answering
UNION
SELECT c.entity_id::text FROM entity_canonical c
WHERE c.scope_id = ANY(%(scope_ids)s) AND c.canonical_id IN (SELECT id FROM answering)
"""
# The visible edges within two hops of the seeds: the part of the scope's entity graph where
# personalized PageRank puts nearly all its mass. Capped, so a hub entity cannot blow it up (at
# 100k facts an entity has ~90 edges): the seeds' own edges up to edge_cap, then at most
# GRAPH_EDGES_PER_ENTITY edges each way per frontier entity, again up to edge_cap.
# Every cap takes edges in id order (the (scope_id, entity, id) indexes of migration 0018 walk it
# without sorting), so the same facts answer the same query with the same edges, wherever their
# rows sit on disk: a LIMIT over a scan in storage order changed the edges, hence the ranking,
# after a row moved (a tier move, a superseded version ended, a restore).
# Each (scope, entity, direction) is walked on its own and the walks' first rows merged: the same
# edges as one scan over them all, but a walk stops at its cap. Given every scope and seed at once,
# Postgres read each entity's edges in full and sorted them, and in the hot form checked each
# against a hash of every fact_tiers row: at 1M facts, with queries naming entities of a few
# thousand edges, that was 0.45 s of a 0.5 s search (p50); the statement alone went 393 -> 16 ms.
# A hot search walks `hot_edges` (migration 0032), the entity pairs of the hot facts alone: on
# the facts table a hot walk passed over every consolidated edge of its entity (thousands for a
# busy one at 1M) to find the hot ones, 26 ms p50 and 106 ms p95 of a search.
GRAPH_EDGES_PER_ENTITY = 3
GraphWalk = Callable[[str, str, str], str]


def _facts_walk(column: str, entity: str, cap: str) -> str:
    """The first `cap` facts by id in scope `sc.id` whose `column` is `entity`, valid at `at`."""
    return f"""(SELECT f.id, f.source_entity, f.target_entity FROM facts f
         WHERE f.scope_id = sc.id AND f.{column} = {entity} AND {_VALID_AT} ORDER BY f.id LIMIT {cap})"""


def _hot_walk(column: str, entity: str, cap: str) -> str:
    """_facts_walk over the hot facts only: `hot_edges` holds exactly the facts with no fact_tiers row."""
    return f"""(SELECT f.id, f.source_entity, f.target_entity FROM hot_edges e JOIN facts f ON f.id = e.fact_id
         WHERE e.scope_id = sc.id AND e.{column} = {entity} AND {_VALID_AT} ORDER BY e.fact_id LIMIT {cap})"""


def _graph_neighbourhood(walk: GraphWalk) -> str:
    """GRAPH_NEIGHBOURHOOD with `walk` reading each (scope, entity, direction)'s edges."""
    return f"""
WITH sc AS (SELECT unnest(%(scope_ids)s::uuid[]) AS id),
seed AS (SELECT unnest(%(seeds)s::uuid[]) AS e),
hop1 AS MATERIALIZED (
    SELECT DISTINCT w.id, w.source_entity, w.target_entity FROM sc CROSS JOIN seed
    CROSS JOIN LATERAL (
        {walk("source_entity", "seed.e", "%(edge_cap)s")}
        UNION ALL
        {walk("target_entity", "seed.e", "%(edge_cap)s")}
    ) AS w
    ORDER BY w.id
    LIMIT %(edge_cap)s
),
frontier AS (
    SELECT source_entity AS e FROM hop1 UNION SELECT target_entity FROM hop1
),
hop2 AS (
    SELECT DISTINCT n.id, n.source_entity, n.target_entity
    FROM sc CROSS JOIN frontier
    CROSS JOIN LATERAL (
        {walk("source_entity", "frontier.e", str(GRAPH_EDGES_PER_ENTITY))}
        UNION ALL
        {walk("target_entity", "frontier.e", str(GRAPH_EDGES_PER_ENTITY))}
    ) AS n
)
SELECT e.id::text, coalesce(cs.canonical_id, e.source_entity)::text, coalesce(ct.canonical_id, e.target_entity)::text
FROM (SELECT id, source_entity, target_entity FROM hop1
      UNION
      (SELECT id, source_entity, target_entity FROM hop2 ORDER BY id LIMIT %(edge_cap)s)) AS e
-- An entity a person merged into another is that other node of the graph (migration 0015).
LEFT JOIN entity_canonical cs ON cs.entity_id = e.source_entity AND cs.scope_id = ANY(%(scope_ids)s)
LEFT JOIN entity_canonical ct ON ct.entity_id = e.target_entity AND ct.scope_id = ANY(%(scope_ids)s)
ORDER BY 1
"""


GRAPH_NEIGHBOURHOOD = _graph_neighbourhood(_facts_walk)
HOT_GRAPH_NEIGHBOURHOOD = _graph_neighbourhood(_hot_walk)

# Cosines of candidates a channel found without reading vectors (the graph channel's edges): a
# result's score is its cosine whatever channel found it.
FACT_COSINES = f"""
SELECT f.id::text, 1 - (f.embedding <=> %(embedding)s) AS cos FROM facts f
WHERE {_VISIBLE} AND f.id = ANY(%(ids)s::uuid[])
"""
# A consolidated store's default-sized search (query_memory `tier: "hot"`): the facts channels
# read hot facts only, and the facts of consolidated tiers are reached through the digests nearest
# the query (DIGEST_MEMBERS). A hot fact is one without a fact_tiers row (migration 0022). The
# ranking statements read the hot tier's own indexes (migration 0025): `hot_facts`, the hot facts
# the last run placed, and `hot_pending`, the facts written since (few, read exactly), so the rows
# they touch do not grow with the consolidated and archived tiers; the graph's walks read
# `hot_edges` (migration 0032). The rest filter the facts table's rows: an exact scan of a small
# corpus and the ts_rank fallback.
_NOT_TIERED = "NOT EXISTS (SELECT 1 FROM fact_tiers ft WHERE ft.fact_id = f.id)"
_VISIBLE_HOT = _VISIBLE + f"AND {_NOT_TIERED}\n"
# A copy in `hot_facts` holds its fact's scope and its validity when the run copied it (migration
# 0028), so the rows a hot search ranks there are filtered without a lookup in `facts` (three
# index pages a row). A fact ended or dated after its copy was made still passes that filter: the
# rows a statement returns are checked against `facts` (_VISIBLE again), a few dozen lookups.
_HOT_INDEXED_VISIBLE = (
    "h.scope_id = ANY(%(scope_ids)s) AND h.visible_from <= %(at)s"
    " AND (h.visible_until IS NULL OR h.visible_until > %(at)s)"
)
_HOT_PENDING = "hot_pending p JOIN facts f ON f.id = p.fact_id"
_PENDING_VISIBLE = f"p.scope_id = ANY(%(scope_ids)s) AND {_VISIBLE} AND {_NOT_TIERED}"

_HOT_DENSE_INDEXED = f"""
SELECT c.id::text AS id, c.cos FROM (
    SELECT h.fact_id AS id, 1 - (h.embedding <=> %(embedding)s) AS cos
    FROM hot_facts h
    WHERE {_HOT_INDEXED_VISIBLE}
    ORDER BY h.embedding <=> %(embedding)s
    LIMIT %(limit)s
) c
JOIN facts f ON f.id = c.id
WHERE {_VISIBLE}"""
_HOT_DENSE_PENDING = f"""
SELECT f.id::text, 1 - (f.embedding <=> %(embedding)s)
FROM {_HOT_PENDING}
WHERE {_PENDING_VISIBLE}
ORDER BY (f.embedding <=> %(embedding)s) + 0
LIMIT %(limit)s
"""
HOT_DENSE_FACTS_HNSW = f"""
({_HOT_DENSE_INDEXED})
UNION ALL
({_HOT_DENSE_PENDING})
ORDER BY cos DESC, id
LIMIT %(limit)s
"""


def _hot_indexed(rel: str, guard: str = "") -> str:
    """Lexical candidates from `hot_facts`' own lexical index."""
    return f"""SELECT h.fact_id AS id, h.tsv, h.tsv_length, h.embedding <=> %(embedding)s AS dist
    FROM hot_facts h, {rel}
    WHERE {guard}{_HOT_INDEXED_VISIBLE} AND h.tsv @@ {rel}.tsq
    ORDER BY dist, h.fact_id
    LIMIT {LEXICAL_CANDIDATES}"""


def _hot_with_pending(rel: str, guard: str = "") -> str:
    """Lexical candidates from `hot_facts` and from the facts in `hot_pending`."""
    return f"""SELECT * FROM (
        ({_hot_indexed(rel, guard)})
        UNION ALL
        (SELECT f.id, f.tsv, f.tsv_length, f.embedding <=> %(embedding)s AS dist
         FROM {_HOT_PENDING}, {rel}
         WHERE {guard}{_PENDING_VISIBLE} AND f.tsv @@ {rel}.tsq
         ORDER BY dist, f.id
         LIMIT {LEXICAL_CANDIDATES})
    ) AS hot
    ORDER BY dist, id
    LIMIT {LEXICAL_CANDIDATES}"""


# Each facts statement's hot-tier forms: filtering the facts table's rows by "no fact_tiers row"
# (HOT_FILTERED), reading the hot tier's indexes and the facts waiting in `hot_pending` (HOT_ONLY),
# and reading the indexes alone when none wait (HOT_INDEXED_ONLY: an empty `hot_pending` still
# cost ~1.4 ms of planning a query). `hot_statement` picks one. The graph's has one form: `hot_edges`
# is kept exact in the writing transaction, so nothing waits for it.
HOT_FILTERED: dict[str, str] = {
    **{sql: sql.replace(_VISIBLE, _VISIBLE_HOT)
       for sql in (DENSE_FACTS_EXACT, DENSE_FACTS_HNSW, LEXICAL_FACTS_BM25, LEXICAL_FACTS_BM25_PAIRS,
                   LEXICAL_FACTS_TS_RANK)},
    GRAPH_NEIGHBOURHOOD: HOT_GRAPH_NEIGHBOURHOOD,
}
_FILTERED = {sql: HOT_FILTERED[sql] for sql in (DENSE_FACTS_EXACT, LEXICAL_FACTS_TS_RANK, GRAPH_NEIGHBOURHOOD)}
HOT_ONLY: dict[str, str] = {
    **_FILTERED,
    DENSE_FACTS_HNSW: HOT_DENSE_FACTS_HNSW,
    LEXICAL_FACTS_BM25: _bm25("facts", "f", "facts", _VISIBLE, pairs=False, matching=_hot_with_pending,
                              recheck=True),
    LEXICAL_FACTS_BM25_PAIRS: _bm25("facts", "f", "facts", _VISIBLE, pairs=True, matching=_hot_with_pending,
                                    recheck=True),
}
HOT_INDEXED_ONLY: dict[str, str] = {
    **_FILTERED,
    DENSE_FACTS_HNSW: _HOT_DENSE_INDEXED,
    LEXICAL_FACTS_BM25: _bm25("facts", "f", "facts", _VISIBLE, pairs=False, matching=_hot_indexed,
                              recheck=True),
    LEXICAL_FACTS_BM25_PAIRS: _bm25("facts", "f", "facts", _VISIBLE, pairs=True, matching=_hot_indexed,
                                    recheck=True),
}
assert all(hot != sql for sql, hot in [*HOT_ONLY.items(), *HOT_INDEXED_ONLY.items(), *HOT_FILTERED.items()])


def hot_statement(sql: str, pending: int) -> str:
    """The hot-tier form of the facts statement `sql`, given how many facts wait in `hot_pending`."""
    if pending > HOT_PENDING_EXACT:
        return HOT_FILTERED[sql]
    return (HOT_ONLY if pending else HOT_INDEXED_ONLY)[sql]


# The current digests nearest the query, and of each the member facts visible at `at` nearest the
# query: the rows a consolidated search adds are bounded by digests × members. Current, because a
# hot search is never `as_of`; ordered by distance alone, so the partial HNSW index over current
# digests serves it (with DIGEST_INDEX_ON, below). An exact scan read every digest of the scope, and
# a digest's vector sits out of line (TOAST) beside its summary: 36-54 ms at 5,562 digests. Topics
# only: every current fact is in one, and a topic holds at most `topic_cap` facts, while an entity
# digest holds everything its entity touches (thousands at 1M facts, each a cosine here: Postgres
# 103 against 62 CPU-ms a query there, the same hit@10 at 10k, 100k and 1M). Areas are left out,
# here and below: their members are their topics', and a topic is the narrower route.
DIGEST_MEMBERS = f"""
WITH nearest AS MATERIALIZED (
    SELECT d.member_ids FROM digests d
    WHERE d.scope_id = ANY(%(scope_ids)s) AND d.valid_to IS NULL AND d.kind = 'topic'
    ORDER BY d.embedding <=> %(embedding)s
    LIMIT %(digests)s
)
SELECT DISTINCT ON (m.id) m.id, m.cos FROM nearest
CROSS JOIN LATERAL (
    SELECT f.id::text AS id, 1 - (f.embedding <=> %(embedding)s) AS cos FROM facts f
    WHERE {_VISIBLE} AND f.id = ANY(nearest.member_ids)
    ORDER BY f.embedding <=> %(embedding)s, f.id
    LIMIT %(members)s
) AS m
ORDER BY m.id
"""

# The current digests that hold the query's candidate-making words (`chosen`, as the lexical
# channel picks them), best first by the idf those words add up to, and of each the facts visible
# at `at` that hold one of them, nearest the query first: how a hot search reaches a consolidated
# fact that shares the query's rare words but sits in no digest near it in meaning. Each word is
# looked up in the digests' GIN index on its own; unnesting every matching digest's words to score
# it cost twice the Postgres time of the whole rest of the search (10k facts).
# A topic's facts are its members (at most `topic_cap`). An entity digest's are the facts touching
# its entity, found with the words through one GIN index (migration 0030): the same facts as its
# members and those written since, which the other channels reach anyway. Its members looked up
# by id were thousands at 1M facts and most of this statement's reads.
# A query whose rarest word more than CANDIDATE_POSTINGS facts hold (which `chosen` keeps for the
# lexical channel) leads to no digest: such a word is in most digests of a large store (up to
# 20,000 of 28,000 at 1M facts), one shared word cannot rank them, and reading them was 3/4 of
# this statement's time at 1M.
DIGEST_MEMBERS_BY_WORDS = f"""
WITH {_query_terms("facts")},
nearest AS MATERIALIZED (
    SELECT d.id, d.kind, d.scope_id, d.subject_id, d.member_ids, sum(chosen.idf) AS score FROM chosen
    JOIN digests d ON d.scope_id = ANY(%(scope_ids)s) AND d.valid_to IS NULL AND d.kind <> 'area'
                  AND d.tsv @@ quote_literal(chosen.term)::tsquery
    WHERE chosen.df <= {CANDIDATE_POSTINGS}
    GROUP BY d.id
    ORDER BY score DESC, d.id
    LIMIT %(digests)s
),
words AS (SELECT string_agg(quote_literal(chosen.term), ' | ')::tsquery AS tsq FROM chosen)
SELECT DISTINCT ON (m.id) m.id, m.cos FROM nearest
CROSS JOIN words
CROSS JOIN LATERAL (
    SELECT held.id::text AS id, 1 - held.dist AS cos FROM (
        SELECT f.id, f.embedding <=> %(embedding)s AS dist FROM facts f
        WHERE nearest.kind = 'topic' AND {_VISIBLE} AND f.id = ANY(nearest.member_ids) AND f.tsv @@ words.tsq
        UNION ALL
        SELECT f.id, f.embedding <=> %(embedding)s AS dist FROM facts f
        WHERE nearest.kind = 'entity' AND {_VISIBLE} AND f.scope_id = nearest.scope_id
          AND (f.source_entity = nearest.subject_id OR f.target_entity = nearest.subject_id)
          AND f.tsv @@ words.tsq
    ) AS held
    ORDER BY held.dist, held.id
    LIMIT %(members)s
) AS m
ORDER BY m.id
"""

# The planner costs a digest's distance like any operator and misses the out-of-line reads, so at
# a few thousand digests it reads them all and sorts unless table scans are switched off for
# DIGEST_MEMBERS alone. Digests are few, so a short walk finds the nearest, and the walk's length
# enters the planner's estimate: at ef_search 200 it read every digest through a btree index and
# sorted (9.8 ms a query at 3,377 digests, against 1.1 ms through HNSW at 80). Sorting must stay
# on: without it the members' lookup walks the facts' HNSW index instead (257 ms).
DIGEST_EF_SEARCH = 80
DIGEST_INDEX_ON = f"""
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
       set_config('hnsw.ef_search', '{DIGEST_EF_SEARCH}', true)
"""
DIGEST_INDEX_OFF = f"""
SELECT set_config('enable_seqscan', 'on', true), set_config('enable_bitmapscan', 'on', true),
       set_config('hnsw.ef_search', '{EF_SEARCH}', true)
"""

# A turn asks a question when its text ends with "?" (trailing spaces aside; a POSIX regular
# expression for Postgres). Nothing about any one chat format: a note appended after the "?" makes
# the turn a statement.
QUESTION_PATTERN = r"\?\s*$"
# The turns next to a hit in the same session (the neighbour channel); also which of the two
# comes first, which asks a question and whether another speaker said the other, so fusion can
# credit a question's reply (fusion.py). A turn with no speaker recorded counts as another's.
EPISODE_NEIGHBOURS = """
SELECT nb.id, hit.id AS hit_id, 1 - (nb.embedding <=> %(embedding)s) AS cos, nb.seq - hit.seq AS step,
       hit.content ~ %(question_pattern)s AS hit_asks, nb.content ~ %(question_pattern)s AS nb_asks,
       coalesce(hit.speaker <> nb.speaker, true) AS other_speaker
FROM episodes hit
JOIN episodes nb
  ON nb.scope_id = hit.scope_id AND nb.session_id = hit.session_id
 AND nb.seq BETWEEN hit.seq - %(radius)s AND hit.seq + %(radius)s AND nb.id <> hit.id
WHERE hit.scope_id = ANY(%(scope_ids)s) AND hit.id = ANY(%(ids)s) AND hit.seq IS NOT NULL
  AND nb.kind <> 'write' AND nb.written_at <= %(at)s AND nb.embedding IS NOT NULL
"""
# For a question turn followed by more turns of its own speaker: the first turn within `reach`
# that someone else said, its reply (a burst of messages ends before the answer starts).
EPISODE_REPLIES = """
SELECT DISTINCT ON (hit.id) hit.id AS hit_id, nb.id, 1 - (nb.embedding <=> %(embedding)s) AS cos
FROM episodes hit
JOIN episodes nb
  ON nb.scope_id = hit.scope_id AND nb.session_id = hit.session_id
 AND nb.seq > hit.seq AND nb.seq <= hit.seq + %(reach)s AND nb.speaker <> hit.speaker
WHERE hit.scope_id = ANY(%(scope_ids)s) AND hit.id = ANY(%(ids)s)
  AND nb.kind <> 'write' AND nb.written_at <= %(at)s AND nb.embedding IS NOT NULL
ORDER BY hit.id, nb.seq
"""

HYDRATE_FACTS = f"""
SELECT {_FACT_COLUMNS}
FROM facts f
JOIN scopes s ON s.id = f.scope_id
JOIN entities se ON se.id = f.source_entity
JOIN entities te ON te.id = f.target_entity
WHERE f.scope_id = ANY(%(scope_ids)s) AND f.id = ANY(%(ids)s)
"""
HYDRATE_EPISODES = """
SELECT ep.id, ep.content AS text, ep.token_count, ep.agent_id, ep.tool, ep.project, ep.session_id,
       ep.written_at, ep.occurred_at AS t_valid, NULL::timestamptz AS t_invalid, s.name AS scope_name,
       ep.speaker AS source, NULL::text AS target, NULL::text AS relation, ep.flags
FROM episodes ep JOIN scopes s ON s.id = ep.scope_id
WHERE ep.scope_id = ANY(%(scope_ids)s) AND ep.id = ANY(%(ids)s)
"""

# The newest visible facts of each scope read, each scope walking facts_scope_written_idx
# (migration 0005) for its own `limit`, then merged: with `scope_id = ANY(...)` over the whole
# table Postgres sorted every visible fact (127 ms at 100k facts).
DIGEST_FACTS = f"""
SELECT {_FACT_COLUMNS}, NULL::float8 AS score
FROM unnest(%(scope_ids)s::uuid[]) AS read(scope_id)
CROSS JOIN LATERAL (
    SELECT f.* FROM facts f
    WHERE f.scope_id = read.scope_id AND {_VALID_AT}
    ORDER BY f.written_at DESC, f.id
    LIMIT %(limit)s
) f
JOIN scopes s ON s.id = f.scope_id
JOIN entities se ON se.id = f.source_entity
JOIN entities te ON te.id = f.target_entity
ORDER BY f.written_at DESC, f.id
LIMIT %(limit)s
"""

# The entities a name means, following a person's merges (migration 0015): a name of an absorbed
# entity means the entity it answers as, and an entity means itself and everything it absorbed.
ABOUT_ENTITIES = """
WITH named AS (
    SELECT e.id FROM entities e
    WHERE e.scope_id = ANY(%(scope_ids)s) AND lower(e.name) = lower(%(name)s)
    UNION
    SELECT a.entity_id FROM entity_aliases a
    WHERE a.scope_id = ANY(%(scope_ids)s) AND lower(a.alias) = lower(%(name)s)
), answering AS (
    SELECT coalesce(c.canonical_id, n.id) AS id
    FROM named n LEFT JOIN entity_canonical c ON c.entity_id = n.id AND c.scope_id = ANY(%(scope_ids)s)
)
SELECT id FROM answering
UNION
SELECT c.entity_id FROM entity_canonical c
WHERE c.scope_id = ANY(%(scope_ids)s) AND c.canonical_id IN (SELECT id FROM answering)
"""

ABOUT_FACTS = f"""
SELECT {_FACT_COLUMNS}, CASE WHEN %(embedding)s::vector IS NULL THEN NULL
                             ELSE 1 - (f.embedding <=> %(embedding)s::vector) END AS score
FROM facts f
JOIN scopes s ON s.id = f.scope_id
JOIN entities se ON se.id = f.source_entity
JOIN entities te ON te.id = f.target_entity
WHERE {_VISIBLE}
  AND (
    (cardinality(%(second)s::uuid[]) = 0
       AND (f.source_entity = ANY(%(first)s) OR f.target_entity = ANY(%(first)s)))
    OR (f.source_entity = ANY(%(first)s) AND f.target_entity = ANY(%(second)s))
    OR (f.source_entity = ANY(%(second)s) AND f.target_entity = ANY(%(first)s))
  )
ORDER BY score DESC NULLS LAST, f.written_at DESC, f.id
LIMIT %(limit)s
"""

# The read and its results in one statement (one round trip on every query).
INSERT_READ = """
WITH r AS (
    INSERT INTO reads (agent_id, tool, query, scopes, as_of, tokens)
    VALUES (%(agent_id)s, %(tool)s, %(query)s, %(scopes)s, %(as_of)s, %(tokens)s)
    RETURNING id
), results AS (
    INSERT INTO read_results (read_id, item_id, item_kind, rank, score)
    SELECT r.id, i.item_id, i.kind, i.rank, i.score
    FROM r, unnest(%(item_ids)s::uuid[], %(kinds)s::text[], %(ranks)s::int[], %(scores)s::float8[])
        AS i(item_id, kind, rank, score)
)
SELECT id FROM r
"""

# Project documents registered by `docs sync` that the caller has not ingested yet, matching any
# word of the query. Documents are the org's, not a scope's (as pending_documents reads them); the
# table holds a few hundred project files, so a scan with an on-the-fly tsvector is cheap.
PENDING_DOCUMENT_MATCHES = """
SELECT d.id, d.project, d.path, d.content_hash, d.size,
       ts_headline('english', d.content, q, 'MaxFragments=2, MinWords=8, MaxWords=30, FragmentDelimiter=" … "')
         AS excerpt,
       ts_rank_cd(to_tsvector('english', d.content), q) AS rank
FROM documents d, websearch_to_tsquery('english', %(words)s) AS q
WHERE d.superseded_at IS NULL
  AND to_tsvector('english', d.content) @@ q
  AND NOT EXISTS (
    SELECT 1 FROM document_ingestions i
    WHERE i.document_id = d.id AND i.agent_id = %(agent_id)s AND i.ingested_at >= d.current_since
  )
ORDER BY rank DESC, d.project, d.path
LIMIT %(limit)s
"""
