"""SQL of the consolidation service. Every statement names the scope it works in."""

from __future__ import annotations

SCOPES_ALL = "SELECT id::text, name FROM scopes ORDER BY created_at, name"
SCOPE_BY_NAME = "SELECT id::text, name FROM scopes WHERE name = %(name)s"
SCOPE_NAME = "SELECT name FROM scopes WHERE id = %(scope_id)s"

# Each fact of the scope with what its tier is decided from: when it was written and ended, its
# last read (the read log) and save, and whether an entity it touches was read since `hot_since`.
FACT_ACTIVITY = """
WITH scope_facts AS (
    SELECT f.id, coalesce(ft.tier, 'hot') AS tier, f.written_at, f.t_invalid, f.source_entity, f.target_entity
    FROM facts f LEFT JOIN fact_tiers ft ON ft.fact_id = f.id
    WHERE f.scope_id = %(scope_id)s
), read_facts AS (
    SELECT rr.item_id AS fact_id, max(r.created_at) AS last_read
    FROM read_results rr JOIN reads r ON r.id = rr.read_id
    WHERE rr.item_kind = 'fact' AND rr.item_id IN (SELECT id FROM scope_facts)
    GROUP BY rr.item_id
), saved AS (
    SELECT s.fact_id, max(s.created_at) AS last_saved
    FROM recall_saves s WHERE s.fact_id IN (SELECT id FROM scope_facts)
    GROUP BY s.fact_id
), read_entities AS (
    SELECT DISTINCT v.entity
    FROM scope_facts f JOIN read_facts rf ON rf.fact_id = f.id,
         LATERAL (VALUES (f.source_entity), (f.target_entity)) AS v(entity)
    WHERE rf.last_read >= %(hot_since)s
)
SELECT f.id::text AS id, f.tier, f.written_at, f.t_invalid, rf.last_read, sv.last_saved,
       (f.source_entity IN (SELECT entity FROM read_entities)
        OR f.target_entity IN (SELECT entity FROM read_entities)) AS entity_read
FROM scope_facts f
LEFT JOIN read_facts rf ON rf.fact_id = f.id
LEFT JOIN saved sv ON sv.fact_id = f.id
ORDER BY f.id
"""

LAST_RUN_STARTED = """
SELECT max(started_at) FROM consolidation_runs WHERE scope_id = %(scope_id)s AND undone_at IS NULL
"""

INSERT_RUN = """
INSERT INTO consolidation_runs (scope_id, actor, policy_version) VALUES (%(scope_id)s, %(actor)s, %(policy_version)s)
RETURNING id::text
"""

FINISH_RUN = """
UPDATE consolidation_runs SET finished_at = clock_timestamp(), counts = %(counts)s
WHERE id = %(run_id)s AND scope_id = %(scope_id)s
"""

INSERT_MOVES = """
INSERT INTO tier_moves (run_id, fact_id, from_tier, to_tier, reason)
SELECT %(run_id)s, m.fact_id, m.from_tier, m.to_tier, m.reason
FROM unnest(%(fact_ids)s::uuid[], %(from_tiers)s::text[], %(to_tiers)s::text[], %(reasons)s::text[])
     AS m(fact_id, from_tier, to_tier, reason)
"""


def _move_tiers(source: str, target: str) -> str:
    """The tier moves of a run, from the tier in column `source` of tier_moves to the one in `target`,
    of facts still in `source`; the count made.

    A hot fact has no fact_tiers row (migration 0022): leaving hot inserts one, coming back deletes
    it, and consolidated <-> archived changes it. Each applies only where the fact's tier is still
    the one the run read, so a concurrent run's move is left alone. The facts table is only read.
    """
    return f"""
WITH moves AS (
    SELECT m.fact_id, m.{source} AS old, m.{target} AS new FROM tier_moves m
    JOIN facts f ON f.id = m.fact_id AND f.scope_id = %(scope_id)s
    WHERE m.run_id = %(run_id)s
), left_hot AS (
    INSERT INTO fact_tiers (fact_id, tier)
    SELECT fact_id, new FROM moves WHERE old = 'hot'
    ON CONFLICT (fact_id) DO NOTHING
    RETURNING fact_id
), back_hot AS (
    DELETE FROM fact_tiers ft USING moves
    WHERE moves.new = 'hot' AND ft.fact_id = moves.fact_id AND ft.tier = moves.old
    RETURNING ft.fact_id
), changed AS (
    UPDATE fact_tiers ft SET tier = moves.new FROM moves
    WHERE moves.old <> 'hot' AND moves.new <> 'hot' AND ft.fact_id = moves.fact_id AND ft.tier = moves.old
    RETURNING ft.fact_id
)
SELECT (SELECT count(*) FROM left_hot) + (SELECT count(*) FROM back_hot) + (SELECT count(*) FROM changed)
"""


APPLY_MOVES = _move_tiers("from_tier", "to_tier")

# Held by whoever changes a fact's tier or copies waiting facts into `hot_facts`, from then to
# its commit: a run (its tier moves and copy), an undo, and the copy between runs (hot_copy.py).
# Without it a copy could read "no fact_tiers row" beside a run's uncommitted move of the same
# fact, and the moved fact would stay in the hot tier's indexes. Statements after taking it see
# what its previous holder committed (read committed: a snapshot per statement).
HOT_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('hot-tier:' || %(scope_id)s, 0))"
TRY_HOT_LOCK = "SELECT pg_try_advisory_xact_lock(hashtextextended('hot-tier:' || %(scope_id)s, 0))"


def _copy_pending(taken: str) -> str:
    """The waiting facts matched by `taken` (a condition on `hot_pending p`) leave `hot_pending`;
    those still hot (no fact_tiers row) get their copy in `hot_facts` (migration 0025). Returns
    how many left and how many were copied. Run under the scope's HOT_LOCK."""
    return f"""
WITH taken AS (
    DELETE FROM hot_pending p WHERE {taken} RETURNING p.fact_id
), copied AS (
    INSERT INTO hot_facts (fact_id, scope_id, embedding, tsv, tsv_length, visible_from, visible_until)
    SELECT f.id, f.scope_id, f.embedding, f.tsv, f.tsv_length, f.t_valid, f.t_invalid
    FROM taken JOIN facts f ON f.id = taken.fact_id
    WHERE NOT EXISTS (SELECT 1 FROM fact_tiers ft WHERE ft.fact_id = f.id)
    ON CONFLICT (fact_id) DO NOTHING
    RETURNING fact_id
)
SELECT (SELECT count(*) FROM taken), (SELECT count(*) FROM copied)
"""


# A run takes every waiting fact of its scope, the moves it just made included. A fact committed
# after this statement's snapshot stays pending.
INDEX_PENDING_HOT = _copy_pending("p.scope_id = %(scope_id)s")

# Between runs: a batch of the waiting facts that writes added (migration 0031), in a scope a run
# has placed (that run not undone). Before its first run a scope's facts all wait, a bulk load's or
# an import's included, and the first run places them all: it would demote most of what a copy made.
# The facts rows are locked first. An erasure locks the facts row before its cascade reaches
# `hot_pending`; taking the rows in that same order, a copy and an erasure wait for each other
# instead of deadlocking, and a row erased meanwhile is skipped. Writes never wait: the row a write
# ends is locked "for no key update".
LOCK_WRITTEN_BATCH = """
SELECT f.id FROM hot_pending w JOIN facts f ON f.id = w.fact_id
WHERE w.scope_id = %(scope_id)s AND w.written
  AND EXISTS (SELECT 1 FROM consolidation_runs r WHERE r.scope_id = %(scope_id)s AND r.undone_at IS NULL)
LIMIT %(batch)s
FOR KEY SHARE OF f
"""
INDEX_WRITTEN_HOT = _copy_pending("p.scope_id = %(scope_id)s AND p.fact_id = ANY(%(fact_ids)s::uuid[])")

# The scopes with written facts waiting: one probe of the partial index each.
SCOPES_WRITTEN_WAITING = """
SELECT s.id::text FROM scopes s
WHERE EXISTS (SELECT 1 FROM hot_pending p WHERE p.scope_id = s.id AND p.written)
ORDER BY s.id
"""

ANALYZE_DIGESTS = "ANALYZE digests"

RUN_LOG = """
SELECT r.id::text AS run_id, s.name AS scope, r.actor, r.policy_version, r.started_at, r.finished_at,
       r.undone_at, r.counts
FROM consolidation_runs r JOIN scopes s ON s.id = r.scope_id
WHERE (%(scope_id)s::uuid IS NULL OR r.scope_id = %(scope_id)s::uuid)
ORDER BY r.started_at DESC, r.id
LIMIT %(limit)s
"""

RUN_FOR_UNDO = """
SELECT r.id::text, r.scope_id::text, r.undone_at, r.finished_at FROM consolidation_runs r WHERE r.id = %(run_id)s
FOR UPDATE
"""

# A fact goes back only if it is still where this run put it.
UNDO_MOVES = _move_tiers("to_tier", "from_tier")

COUNT_MOVES = "SELECT count(*) FROM tier_moves WHERE run_id = %(run_id)s"

MARK_UNDONE = """
UPDATE consolidation_runs SET undone_at = clock_timestamp() WHERE id = %(run_id)s AND scope_id = %(scope_id)s
"""

# ---- digests ---------------------------------------------------------------------------------

# The current facts of a scope with what an entity digest is built from.
CURRENT_FACTS = """
SELECT f.id::text AS id, f.source_entity::text AS source, f.target_entity::text AS target, f.relation, f.text,
       f.written_at, f.project, f.session_id AS session, f.supersedes::text AS supersedes, f.embedding
FROM facts f
WHERE f.scope_id = %(scope_id)s AND f.t_invalid IS NULL
ORDER BY f.id
"""

ENTITY_NAMES = """
SELECT id::text, name, type FROM entities WHERE scope_id = %(scope_id)s AND id = ANY(%(ids)s::uuid[])
"""

SUPERSEDED_TEXTS = """
SELECT id::text, text, t_invalid FROM facts WHERE scope_id = %(scope_id)s AND id = ANY(%(ids)s::uuid[])
"""

CURRENT_DIGESTS = """
SELECT id::text, kind, subject_id::text AS subject_id, version, member_hash, summary, parts::text[] AS parts
FROM digests WHERE scope_id = %(scope_id)s AND valid_to IS NULL
"""

LAST_VERSIONS = """
SELECT kind, subject_id::text, max(version) FROM digests WHERE scope_id = %(scope_id)s GROUP BY kind, subject_id
"""

END_DIGEST = """
UPDATE digests SET valid_to = clock_timestamp(), ended_by_run = %(run_id)s
WHERE id = %(id)s AND scope_id = %(scope_id)s AND valid_to IS NULL
"""

INSERT_DIGEST = """
INSERT INTO digests (scope_id, kind, subject_id, version, member_ids, member_hash, summary, token_count, projects,
                     first_seen, last_seen, embedding, run_id, tsv, parts)
VALUES (%(scope_id)s, %(kind)s, %(subject_id)s, %(version)s, %(member_ids)s::uuid[], %(member_hash)s, %(summary)s,
        %(token_count)s, %(projects)s, %(first_seen)s, %(last_seen)s, %(embedding)s, %(run_id)s,
        echo_digest_lexical(%(member_ids)s::uuid[]), %(parts)s::uuid[])
"""

UNDO_DIGESTS_STARTED = """
UPDATE digests SET valid_to = clock_timestamp(), ended_by_run = %(run_id)s
WHERE run_id = %(run_id)s AND scope_id = %(scope_id)s AND valid_to IS NULL
"""

UNDO_DIGESTS_ENDED = """
UPDATE digests d SET valid_to = NULL, ended_by_run = NULL
WHERE d.ended_by_run = %(run_id)s AND d.scope_id = %(scope_id)s AND d.run_id <> %(run_id)s
  AND NOT EXISTS (SELECT 1 FROM digests c WHERE c.scope_id = d.scope_id AND c.kind = d.kind
                  AND c.subject_id = d.subject_id AND c.valid_to IS NULL)
"""

# ---- brief -----------------------------------------------------------------------------------

# The brief quotes the top nodes of a scope's digests: areas first, then entity digests, then the
# topics no area holds (a topic inside an area would repeat it), each kind the most recently active
# first. A digest is in the project when one of its facts was written in it, named as a path or by its
# last part (agents record either); the GIN indexes of migration 0019 find those. The rest are read
# per scope from the brief's index (migration 0024: it holds every column read here but the
# abstract's size), the first %(rows)s and no more: a large store holds thousands of digests and a
# brief of at most 8,000 tokens quotes a few dozen.
# `available` counts every top node without reading them: the current digests less the topics that
# the current areas hold (a topic is in one area at most). Only the order and each digest's size are
# read here: the summaries (434 KB for 200 digests of a 100k-fact store) are read for the few that
# fit the budget, by BRIEF_ITEMS.
_TOP_NODE = """NOT (d.brief_rank = 2 AND EXISTS (
          SELECT 1 FROM digests a WHERE a.scope_id = d.scope_id AND a.valid_to IS NULL AND a.kind = 'area'
          AND a.parts @> ARRAY[d.subject_id]))"""
BRIEF_ORDER = f"""
WITH in_project AS (
    -- Sorted first (OFFSET 0 keeps the check out of the sort's input), so the top-node check probes
    -- only the topics the first rows reach, not every topic of the project; the rows keep that order.
    SELECT d.id, true AS in_project, d.brief_rank AS rank, d.member_count AS facts, d.last_seen, d.token_count
    FROM (
        SELECT d.id, d.scope_id, d.subject_id, d.brief_rank, d.member_count, d.last_seen, d.token_count
        FROM digests d
        WHERE cardinality(%(projects)s::text[]) > 0
          AND d.scope_id = ANY(%(scope_ids)s::uuid[]) AND d.valid_to IS NULL
          AND (d.projects && %(projects)s::text[] OR echo_project_tails(d.projects) && %(projects)s::text[])
        ORDER BY d.brief_rank, d.last_seen DESC, d.member_count DESC, d.id
        OFFSET 0
    ) AS d
    WHERE {_TOP_NODE}
    LIMIT %(rows)s
), first_rows AS (
    SELECT f.* FROM unnest(%(scope_ids)s::uuid[]) AS sc(id)
    CROSS JOIN LATERAL (
        SELECT d.id, false AS in_project, d.brief_rank AS rank, d.member_count AS facts, d.last_seen,
               d.token_count
        FROM digests d
        WHERE d.scope_id = sc.id AND d.valid_to IS NULL AND {_TOP_NODE}
        ORDER BY d.brief_rank, d.last_seen DESC, d.member_count DESC, d.id
        LIMIT %(rows)s
    ) AS f
)
SELECT u.id::text AS digest_id,
       u.token_count + coalesce((SELECT a.token_count FROM digest_abstracts a WHERE a.digest_id = u.id), 0) AS token_count,
       (SELECT count(*) FROM digests a WHERE a.scope_id = ANY(%(scope_ids)s::uuid[]) AND a.valid_to IS NULL)
       - (SELECT coalesce(sum(cardinality(a.parts)), 0) FROM digests a
          WHERE a.scope_id = ANY(%(scope_ids)s::uuid[]) AND a.valid_to IS NULL AND a.kind = 'area') AS available
FROM (
    SELECT * FROM in_project
    UNION ALL
    SELECT * FROM first_rows f WHERE NOT EXISTS (SELECT 1 FROM in_project p WHERE p.id = f.id)
) AS u
ORDER BY u.in_project DESC, u.rank, u.last_seen DESC, u.facts DESC, u.id
LIMIT %(rows)s
"""

# The digests BRIEF_ORDER chose, in the order of %(ids)s, each with its abstract when the user's
# model wrote one (a digest version has at most one; its size is counted in BRIEF_ORDER's).
BRIEF_ITEMS = """
SELECT d.id::text AS digest_id, d.kind, s.name AS scope_name,
       CASE WHEN d.kind = 'entity' THEN (SELECT e.name FROM entities e WHERE e.id = d.subject_id) END AS entity,
       d.summary, d.token_count + coalesce(a.token_count, 0) AS token_count, cardinality(d.member_ids) AS facts,
       d.last_seen, a.text AS abstract, a.model AS abstract_model
FROM unnest(%(ids)s::uuid[]) WITH ORDINALITY AS chosen(id, position)
JOIN digests d ON d.id = chosen.id
JOIN scopes s ON s.id = d.scope_id
LEFT JOIN digest_abstracts a ON a.digest_id = d.id
ORDER BY chosen.position
"""

# The buffer cache after a run (prewarm.py): whether the server has pg_prewarm, each relation's
# size in pages (in the order asked, those that exist) beside the cache's, and reading them.
HAS_PREWARM = "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_prewarm')"
RELATION_PAGES = """
SELECT r.name, pg_relation_size(to_regclass(r.name)) / current_setting('block_size')::bigint AS pages,
       (SELECT setting::bigint FROM pg_settings WHERE name = 'shared_buffers') AS cache_pages
FROM unnest(%(relations)s::text[]) WITH ORDINALITY AS r(name, position)
WHERE to_regclass(r.name) IS NOT NULL
ORDER BY r.position
"""
PREWARM = "SELECT coalesce(sum(pg_prewarm(to_regclass(r))), 0)::bigint FROM unnest(%(relations)s::text[]) AS r"
