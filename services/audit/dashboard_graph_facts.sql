-- The graph's edges: every fact valid at %(at)s in the readable scopes, narrowed by the filters.
-- Validity is half-open, as in query_memory: t_valid <= at < t_invalid (or no end).
SELECT f.id, f.source_entity, f.target_entity, f.relation, f.agent_id, f.project, f.written_at
FROM facts f
WHERE f.scope_id = ANY(%(scope_ids)s::uuid[])
  AND f.t_valid <= %(at)s AND (f.t_invalid IS NULL OR f.t_invalid > %(at)s)
  AND (%(agent)s::text IS NULL OR f.agent_id = %(agent)s::text)
  AND (%(project)s::text IS NULL OR f.project = %(project)s::text)
  AND (%(since)s::timestamptz IS NULL OR f.written_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR f.written_at < %(until)s::timestamptz)
ORDER BY f.id
