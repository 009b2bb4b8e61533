"""SQL of the retrieval service. Every statement filters by scope before ranking.

Validity is half-open: a fact is visible at time T when t_valid <= T < t_invalid (or t_invalid is null).
"""

_FACT_COLUMNS = """
f.id, f.text, f.token_count, f.agent_id, f.tool, f.project, f.session_id, f.written_at,
f.t_valid, f.t_invalid, s.name AS scope_name, se.name AS source, te.name AS target, f.relation
"""

_VISIBLE = """
f.scope_id = ANY(%(scope_ids)s)
AND f.t_valid <= %(at)s AND (f.t_invalid IS NULL OR f.t_invalid > %(at)s)
"""

DENSE_FACTS = f"""
SELECT {_FACT_COLUMNS}, 1 - (f.embedding <=> %(embedding)s) AS score
FROM facts f
JOIN scopes s ON s.id = f.scope_id
JOIN entities se ON se.id = f.source_entity
JOIN entities te ON te.id = f.target_entity
WHERE {_VISIBLE}
ORDER BY f.embedding <=> %(embedding)s
LIMIT %(limit)s
"""

DIGEST_FACTS = f"""
SELECT {_FACT_COLUMNS}, NULL::float8 AS score
FROM facts f
JOIN scopes s ON s.id = f.scope_id
JOIN entities se ON se.id = f.source_entity
JOIN entities te ON te.id = f.target_entity
WHERE {_VISIBLE}
ORDER BY f.written_at DESC, f.id
LIMIT %(limit)s
"""

ABOUT_ENTITIES = """
SELECT DISTINCT e.id FROM entities e
LEFT JOIN entity_aliases a ON a.entity_id = e.id
WHERE e.scope_id = ANY(%(scope_ids)s)
  AND (lower(e.name) = lower(%(name)s) OR lower(a.alias) = lower(%(name)s))
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
ORDER BY score DESC NULLS LAST, f.written_at DESC
LIMIT %(limit)s
"""

DENSE_EPISODES = """
SELECT ep.id, ep.content AS text, ep.token_count, ep.agent_id, ep.tool, ep.project, ep.session_id,
       ep.written_at, ep.occurred_at AS t_valid, NULL::timestamptz AS t_invalid, s.name AS scope_name,
       ep.speaker AS source, NULL::text AS target, NULL::text AS relation,
       1 - (ep.embedding <=> %(embedding)s) AS score
FROM episodes ep JOIN scopes s ON s.id = ep.scope_id
WHERE ep.scope_id = ANY(%(scope_ids)s) AND ep.kind <> 'write' AND ep.embedding IS NOT NULL
  AND ep.written_at <= %(at)s
ORDER BY ep.embedding <=> %(embedding)s
LIMIT %(limit)s
"""

INSERT_READ = """
INSERT INTO reads (agent_id, tool, query, scopes, as_of, tokens)
VALUES (%(agent_id)s, %(tool)s, %(query)s, %(scopes)s, %(as_of)s, %(tokens)s)
RETURNING id
"""
INSERT_READ_RESULT = """
INSERT INTO read_results (read_id, item_id, item_kind, rank, score) VALUES (%s, %s, %s, %s, %s)
"""
