"""SQL of the audit service. Every statement on a scoped table filters by scope_id.

`reads` and `read_results` carry no scope_id (a read may span scopes); they are filtered by the
scope names the read searched (`reads.scopes`) and by the scope of the item returned.
"""

ALL_SCOPES = """
SELECT id, name, kind, owner_agent, readers, writers, created_at FROM scopes ORDER BY created_at, id
"""

# ---- get_audit_log -----------------------------------------------------------------------------

AUDIT_COLUMNS = """
a.id, a.kind, s.name AS scope_name, a.agent_id, a.session_id, a.tool, a.fact_id, a.entity_id,
a.before, a.after, a.reason, a.post_hoc, a.created_at
"""

AUDIT_PAGE = f"""
SELECT {AUDIT_COLUMNS}
FROM audit_log a LEFT JOIN scopes s ON s.id = a.scope_id
WHERE (a.scope_id = ANY(%(scope_ids)s) OR (%(unscoped)s AND a.scope_id IS NULL))
  AND (%(since)s::timestamptz IS NULL OR a.created_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR a.created_at < %(until)s::timestamptz)
  AND (%(agent)s::text IS NULL OR a.agent_id = %(agent)s::text)
  AND (%(kind)s::text IS NULL OR a.kind = %(kind)s::text)
  AND (%(fact_id)s::uuid IS NULL OR a.fact_id = %(fact_id)s::uuid OR a.before->>'fact_id' = %(fact_id)s::text)
  AND (%(after_t)s::timestamptz IS NULL OR (a.created_at, a.id) > (%(after_t)s::timestamptz, %(after_id)s::bigint))
ORDER BY a.created_at, a.id
LIMIT %(limit)s
"""

# ---- why ---------------------------------------------------------------------------------------

FACT_IN_SCOPES = """
SELECT f.id, f.scope_id, s.name AS scope_name FROM facts f JOIN scopes s ON s.id = f.scope_id
WHERE f.id = %(fact_id)s AND f.scope_id = ANY(%(scope_ids)s)
"""

# Every version of the claim: follow `supersedes` back to the first and forward to the newest.
FACT_VERSIONS = """
WITH RECURSIVE back AS (
    SELECT f.id, f.supersedes FROM facts f WHERE f.id = %(fact_id)s AND f.scope_id = %(scope_id)s
    UNION
    SELECT p.id, p.supersedes FROM facts p JOIN back b ON p.id = b.supersedes WHERE p.scope_id = %(scope_id)s
), fwd AS (
    SELECT f.id FROM facts f WHERE f.id = %(fact_id)s AND f.scope_id = %(scope_id)s
    UNION
    SELECT n.id FROM facts n JOIN fwd w ON n.supersedes = w.id WHERE n.scope_id = %(scope_id)s
)
SELECT f.id, f.text, f.relation, f.confidence, f.causal_hint, f.hint_origin, f.supersedes, f.episode_id,
       f.agent_id, f.tool, f.project, f.session_id, f.written_at, f.t_valid, f.t_invalid,
       f.source_entity, se.name AS source, f.target_entity, te.name AS target, f.flags
FROM facts f
JOIN entities se ON se.id = f.source_entity
JOIN entities te ON te.id = f.target_entity
WHERE f.scope_id = %(scope_id)s AND f.id IN (SELECT id FROM back UNION SELECT id FROM fwd)
ORDER BY f.t_valid, f.written_at, f.id
"""

ENTITY = """
SELECT e.id, e.name, e.type, e.created_by, e.created_at,
       coalesce(array_agg(a.alias ORDER BY a.created_at, a.alias) FILTER (WHERE a.alias IS NOT NULL), '{}') AS aliases
FROM entities e LEFT JOIN entity_aliases a ON a.entity_id = e.id AND a.scope_id = e.scope_id
WHERE e.scope_id = %(scope_id)s AND e.id = %(entity_id)s
GROUP BY e.id
"""

# How mentions resolved to the entity; a person's identity changes are listed apart (ENTITY_IDENTITY).
ENTITY_AUDIT = f"""
SELECT {AUDIT_COLUMNS}
FROM audit_log a LEFT JOIN scopes s ON s.id = a.scope_id
WHERE a.scope_id = %(scope_id)s AND a.entity_id = %(entity_id)s AND NOT (a.kind = ANY(%(identity_kinds)s))
ORDER BY a.created_at, a.id
"""

# Merges, unmerges and renames of the entity, and merges into it (after.surviving_id).
ENTITY_IDENTITY = f"""
SELECT {AUDIT_COLUMNS}
FROM audit_log a LEFT JOIN scopes s ON s.id = a.scope_id
WHERE a.scope_id = %(scope_id)s AND a.kind = ANY(%(identity_kinds)s)
  AND (a.entity_id = %(entity_id)s OR a.after->>'surviving_id' = %(entity_id)s::text)
ORDER BY a.created_at, a.id
"""

# The entity this one answers as now, when a merge in force absorbed it (migration 0015).
ENTITY_MERGED_INTO = """
SELECT c.canonical_id FROM entity_canonical c WHERE c.scope_id = %(scope_id)s AND c.entity_id = %(entity_id)s
"""

FACTS_AUDIT = f"""
SELECT {AUDIT_COLUMNS}
FROM audit_log a LEFT JOIN scopes s ON s.id = a.scope_id
WHERE a.scope_id = %(scope_id)s
  AND (a.fact_id = ANY(%(fact_ids)s::uuid[]) OR a.before->>'fact_id' = ANY(%(fact_ids)s::text[]))
ORDER BY a.created_at, a.id
"""

READS_OF_FACTS = """
SELECT r.id AS read_id, rr.item_id, r.agent_id, r.tool, r.query, r.as_of, rr.rank, rr.score, r.created_at
FROM read_results rr JOIN reads r ON r.id = rr.read_id
WHERE rr.item_id = ANY(%(fact_ids)s::uuid[]) AND rr.item_kind = 'fact' AND %(scope_name)s = ANY(r.scopes)
ORDER BY r.created_at, r.id
"""

SAVES_OF_FACTS = """
SELECT rs.id, rs.fact_id, rs.read_id, rs.agent_id, rs.note, rs.created_at
FROM recall_saves rs JOIN facts f ON f.id = rs.fact_id
WHERE f.scope_id = %(scope_id)s AND rs.fact_id = ANY(%(fact_ids)s::uuid[])
ORDER BY rs.created_at, rs.id
"""
