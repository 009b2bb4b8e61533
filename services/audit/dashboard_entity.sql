-- One entity, if it lives in a readable scope, with its aliases.
SELECT e.id, e.name, e.type, e.scope_id, s.name AS scope_name,
       coalesce(array_agg(a.alias ORDER BY a.created_at, a.alias) FILTER (WHERE a.alias IS NOT NULL), '{}') AS aliases
FROM entities e
JOIN scopes s ON s.id = e.scope_id
LEFT JOIN entity_aliases a ON a.entity_id = e.id AND a.scope_id = e.scope_id
WHERE e.id = %(entity_id)s AND e.scope_id = ANY(%(scope_ids)s::uuid[])
GROUP BY e.id, s.name
