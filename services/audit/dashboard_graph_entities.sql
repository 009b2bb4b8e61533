-- The graph's nodes: the entities the selected facts connect, with the scope each lives in.
SELECT e.id, e.name, e.type, s.name AS scope_name
FROM entities e JOIN scopes s ON s.id = e.scope_id
WHERE e.scope_id = ANY(%(scope_ids)s::uuid[]) AND e.id = ANY(%(ids)s::uuid[])
