"""SQL of the causal service. Every statement filters by scope first, then by validity at `at`.

Validity is half-open, as in retrieval: a fact counts at time T when t_valid <= T < t_invalid
(or t_invalid is null), so a superseded fact takes part in chains only for times it was valid.
"""

_VISIBLE = """
f.scope_id = ANY(%(scope_ids)s)
AND f.t_valid <= %(at)s AND (f.t_invalid IS NULL OR f.t_invalid > %(at)s)
"""

# Entities are walked as the entity they answer as now: a person's merge (migration 0015,
# view entity_canonical) makes an absorbed entity's facts steps of the entity that absorbed it.
_ANSWERING = """
LEFT JOIN entity_canonical cs ON cs.entity_id = f.source_entity AND cs.scope_id = f.scope_id
LEFT JOIN entity_canonical ct ON ct.entity_id = f.target_entity AND ct.scope_id = f.scope_id
JOIN entities se ON se.id = coalesce(cs.canonical_id, f.source_entity)
JOIN entities te ON te.id = coalesce(ct.canonical_id, f.target_entity)
"""

# Exact, case-insensitive match on the entity's name or one of its aliases, among entities that
# existed at `at` (an entity created later cannot be what the caller asked about then); an
# absorbed entity matches as the entity it answers as.
MATCH_ENTITIES = """
SELECT coalesce(c.canonical_id, e.id) AS id, coalesce(ce.name, e.name) AS name, s.name AS scope_name,
       CASE WHEN lower(e.name) = lower(%(name)s) AND c.canonical_id IS NULL THEN 'name' ELSE 'alias' END
           AS matched_by
FROM entities e JOIN scopes s ON s.id = e.scope_id
LEFT JOIN entity_canonical c ON c.entity_id = e.id AND c.scope_id = e.scope_id
LEFT JOIN entities ce ON ce.id = c.canonical_id AND ce.scope_id = e.scope_id
WHERE e.scope_id = ANY(%(scope_ids)s) AND e.created_at <= %(at)s
  AND (lower(e.name) = lower(%(name)s)
       OR EXISTS (SELECT 1 FROM entity_aliases a
                  WHERE a.scope_id = e.scope_id AND a.entity_id = e.id AND lower(a.alias) = lower(%(name)s)))
ORDER BY e.created_at, e.id
"""

# The best dense hits for free text; the entities they touch become the topic.
DENSE_HITS = f"""
SELECT coalesce(cs.canonical_id, f.source_entity) AS source_entity, se.name AS source_name,
       coalesce(ct.canonical_id, f.target_entity) AS target_entity, te.name AS target_name,
       s.name AS scope_name, 1 - (f.embedding <=> %(embedding)s) AS score
FROM facts f
JOIN scopes s ON s.id = f.scope_id
{_ANSWERING}
WHERE {_VISIBLE}
ORDER BY f.embedding <=> %(embedding)s
LIMIT %(limit)s
"""

# Hinted facts touching any of the given entities or what they absorbed (one walk level).
HINTED_TOUCHING = f"""
WITH grp AS (
    SELECT x.id FROM unnest(%(entity_ids)s::uuid[]) AS x(id)
    UNION
    SELECT c.entity_id FROM entity_canonical c
    WHERE c.scope_id = ANY(%(scope_ids)s) AND c.canonical_id = ANY(%(entity_ids)s::uuid[])
)
SELECT f.id, f.text, f.relation, f.causal_hint, coalesce(cs.canonical_id, f.source_entity) AS source_entity,
       se.name AS source_name, coalesce(ct.canonical_id, f.target_entity) AS target_entity,
       te.name AS target_name, f.agent_id, f.tool, f.project, f.session_id,
       f.written_at, f.t_valid, f.t_invalid, s.name AS scope_name, f.flags
FROM facts f
JOIN scopes s ON s.id = f.scope_id
{_ANSWERING}
WHERE {_VISIBLE}
  AND f.causal_hint IS NOT NULL
  AND (f.source_entity IN (SELECT id FROM grp) OR f.target_entity IN (SELECT id FROM grp))
ORDER BY f.t_valid, f.id
LIMIT %(limit)s
"""

# Whether anyone recorded a cause at all in these scopes at `at` (tells two empty kinds apart).
COUNT_STEP_HINTED = f"""
SELECT count(*) FROM facts f
WHERE {_VISIBLE} AND f.causal_hint IN ('led_to', 'caused_by', 'enabled_by', 'blocked_by')
"""
