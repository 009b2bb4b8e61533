-- The statements of `health`, one per `-- name:` block (loaded by services/audit/health_queries.py).
-- Every statement reads the store's own tables and filters by the scopes asked about:
-- %(scope_ids)s (uuid[]) and, for `reads` (which carry stored scope names), %(stored_names)s.
-- %(admin)s is the admin identity's agent id; %(since)s the start of the read window.

-- name: facts
SELECT count(*) AS facts,
       count(*) FILTER (WHERE f.t_invalid IS NULL) AS active_facts,
       count(*) FILTER (WHERE f.agent_id = %(admin)s) AS bulk_facts,
       max(f.written_at) FILTER (WHERE f.agent_id <> %(admin)s) AS last_real_write,
       max(f.written_at) AS last_write,
       coalesce(sum(f.token_count) FILTER (WHERE f.t_invalid IS NULL), 0)::bigint AS full_dump_tokens
FROM facts f
WHERE f.scope_id = ANY(%(scope_ids)s)

-- name: imported_episodes
SELECT count(*) AS imported_episodes
FROM episodes e
WHERE e.scope_id = ANY(%(scope_ids)s) AND e.kind <> 'write'

-- name: writers
SELECT f.agent_id, count(*) AS facts, max(f.written_at) AS last_write
FROM facts f
WHERE f.scope_id = ANY(%(scope_ids)s)
GROUP BY f.agent_id
ORDER BY max(f.written_at) DESC, f.agent_id

-- name: live_tokens
SELECT t.agent_id, t.write_scopes
FROM tokens t
WHERE t.revoked_at IS NULL
ORDER BY t.agent_id

-- name: reads
SELECT count(*) AS reads,
       count(*) FILTER (WHERE EXISTS (SELECT 1 FROM read_results rr WHERE rr.read_id = r.id)) AS reads_with_results,
       avg(r.tokens)::float8 AS recall_tokens_mean
FROM reads r
WHERE r.scopes && %(stored_names)s::text[] AND r.agent_id <> %(admin)s AND r.created_at >= %(since)s

-- name: saves
SELECT count(*) AS saves
FROM recall_saves rs JOIN facts f ON f.id = rs.fact_id
WHERE f.scope_id = ANY(%(scope_ids)s) AND rs.agent_id <> %(admin)s AND rs.created_at >= %(since)s

-- name: deferred_waiting
SELECT count(*) AS deferred_waiting
FROM deferred_mentions d
WHERE d.scope_id = ANY(%(scope_ids)s) AND d.resolved_at IS NULL

-- name: instruction_like
-- Rows labelled at write time (migration 0014); the partial indexes hold only flagged rows.
SELECT (SELECT count(*) FROM facts f
        WHERE f.scope_id = ANY(%(scope_ids)s) AND f.flags <> '{}' AND 'instruction_like' = ANY(f.flags)
          AND f.t_invalid IS NULL) AS instruction_like_facts,
       (SELECT count(*) FROM episodes e
        WHERE e.scope_id = ANY(%(scope_ids)s) AND e.flags <> '{}' AND 'instruction_like' = ANY(e.flags))
           AS instruction_like_episodes

-- name: lexical
-- Rows each corpus holds against what its statistics count (the triggers of migration 0003 count
-- every inserted row; a rebuild by `echo-memory reindex` recounts them).
SELECT s.id AS scope_id, c.corpus,
       CASE c.corpus
           WHEN 'facts' THEN (SELECT count(*) FROM facts f WHERE f.scope_id = s.id)
           ELSE (SELECT count(*) FROM episodes e WHERE e.scope_id = s.id AND e.kind <> 'write')
       END AS rows,
       ls.doc_count AS stats_rows, ls.format_version
FROM scopes s
CROSS JOIN (VALUES ('facts'), ('episodes')) AS c(corpus)
LEFT JOIN lexical_stats ls ON ls.scope_id = s.id AND ls.corpus = c.corpus
WHERE s.id = ANY(%(scope_ids)s)
ORDER BY s.name, c.corpus

-- name: embedding_models
SELECT se.scope_id, se.model
FROM scope_embeddings se
WHERE se.scope_id = ANY(%(scope_ids)s)

-- name: calibration
-- The newest `echo-memory calibrate` run (resolution_calibration); no row: it never ran.
SELECT CASE WHEN c.applied THEN 'applied' ELSE 'reported' END AS kind,
       'AUC ' || round(c.auc::numeric, 3) || ' (95%% CI ' || round(c.auc_low::numeric, 3) || '-'
           || round(c.auc_high::numeric, 3) || ') on ' || c.store_pairs || ' store pairs and '
           || c.labelled_pairs || ' labelled pairs' AS reason,
       c.computed_at AS created_at
FROM resolution_calibration c
ORDER BY c.computed_at DESC, c.id DESC
LIMIT 1

-- name: consolidation
-- The newest finished consolidation run of these scopes, and the failures in the window (a failed
-- sweep, scope_id null, had not reached any scope: it counts for every scope).
SELECT (SELECT max(r.finished_at) FROM consolidation_runs r
        WHERE r.scope_id = ANY(%(scope_ids)s) AND r.undone_at IS NULL) AS last_run,
       (SELECT count(*) FROM consolidation_failures x
        WHERE (x.scope_id IS NULL OR x.scope_id = ANY(%(scope_ids)s)) AND x.failed_at >= %(since)s) AS failures,
       x.failed_at AS last_failure_at, x.code || ': ' || x.message AS last_failure
FROM (SELECT 1) one
LEFT JOIN LATERAL (
    SELECT f.failed_at, f.code, f.message FROM consolidation_failures f
    WHERE f.scope_id IS NULL OR f.scope_id = ANY(%(scope_ids)s)
    ORDER BY f.failed_at DESC, f.id DESC
    LIMIT 1
) x ON true
