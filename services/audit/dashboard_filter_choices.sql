-- What the dashboard's filters can offer for the readable scopes: writers, projects, time span.
SELECT
    array(SELECT DISTINCT f.agent_id FROM facts f WHERE f.scope_id = ANY(%(scope_ids)s::uuid[]) ORDER BY 1) AS agents,
    array(SELECT DISTINCT f.project FROM facts f
          WHERE f.scope_id = ANY(%(scope_ids)s::uuid[]) AND f.project IS NOT NULL ORDER BY 1) AS projects,
    (SELECT min(f.t_valid) FROM facts f WHERE f.scope_id = ANY(%(scope_ids)s::uuid[])) AS first,
    (SELECT greatest(max(f.written_at), max(f.t_valid), max(f.t_invalid))
     FROM facts f WHERE f.scope_id = ANY(%(scope_ids)s::uuid[])) AS last
