-- Every fact version an entity takes part in (either end), newest validity first; `total` counts
-- them all before the limit.
SELECT f.id, f.text, se.name AS source, te.name AS target, f.relation,
       CASE WHEN f.source_entity = %(entity_id)s THEN 'source' ELSE 'target' END AS role,
       f.agent_id, f.tool, f.project, f.session_id, f.written_at, f.t_valid, f.t_invalid,
       (f.t_valid <= %(at)s AND (f.t_invalid IS NULL OR f.t_invalid > %(at)s)) AS valid_at, f.flags,
       count(*) OVER () AS total
FROM facts f
JOIN entities se ON se.id = f.source_entity
JOIN entities te ON te.id = f.target_entity
WHERE f.scope_id = %(scope_id)s
  AND (f.source_entity = %(entity_id)s OR f.target_entity = %(entity_id)s)
  AND (%(agent)s::text IS NULL OR f.agent_id = %(agent)s::text)
  AND (%(project)s::text IS NULL OR f.project = %(project)s::text)
  AND (%(since)s::timestamptz IS NULL OR f.written_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR f.written_at < %(until)s::timestamptz)
ORDER BY f.t_valid DESC, f.written_at DESC, f.id
LIMIT %(limit)s
