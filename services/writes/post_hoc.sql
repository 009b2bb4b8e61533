-- The statements of unhinted_facts, add_causal_hints and clear_post_hoc, one per `-- name:` block
-- (loaded by services/writes/post_hoc.py). No statement edits a claim or deletes a fact: a new
-- version is a new row, and a version stops being current only through its t_invalid.

-- name: unhinted
SELECT f.id, f.scope_id, f.relation, f.text, se.name AS source, te.name AS target, f.written_at
FROM facts f
JOIN entities se ON se.id = f.source_entity
JOIN entities te ON te.id = f.target_entity
WHERE f.scope_id = ANY(%(scope_ids)s::uuid[]) AND f.t_invalid IS NULL AND f.causal_hint IS NULL
  AND (%(first)s OR (f.written_at, f.id) > (%(k1)s::timestamptz, %(k2)s::uuid))
ORDER BY f.written_at, f.id
LIMIT %(limit)s

-- name: scopes_of
SELECT DISTINCT scope_id FROM facts WHERE id = ANY(%(ids)s::uuid[]) ORDER BY scope_id

-- name: lock_facts
SELECT f.id, f.scope_id, f.text, f.relation, f.confidence, f.causal_hint, f.t_invalid IS NULL AS current,
       s.name AS scope_name, se.name AS source, te.name AS target
FROM facts f
JOIN scopes s ON s.id = f.scope_id
JOIN entities se ON se.id = f.source_entity
JOIN entities te ON te.id = f.target_entity
WHERE f.id = ANY(%(ids)s::uuid[]) AND f.scope_id = ANY(%(scope_ids)s::uuid[])
ORDER BY f.id
FOR UPDATE OF f

-- name: end_version
UPDATE facts SET t_invalid = %(now)s WHERE scope_id = %(scope_id)s AND id = %(id)s AND t_invalid IS NULL

-- name: hinted_copy
INSERT INTO facts (scope_id, episode_id, source_entity, target_entity, relation, text, confidence,
                   causal_hint, hint_origin, t_valid, supersedes, agent_id, tool, project, session_id,
                   written_at, embedding, token_count, flags)
SELECT scope_id, episode_id, source_entity, target_entity, relation, text, confidence,
       %(causal_hint)s, 'post_hoc', %(now)s, id, %(agent_id)s, %(tool)s, project, %(session_id)s,
       %(now)s, embedding, token_count, flags
FROM facts WHERE id = %(id)s
RETURNING id

-- name: restored_copy
INSERT INTO facts (scope_id, episode_id, source_entity, target_entity, relation, text, confidence,
                   causal_hint, hint_origin, t_valid, supersedes, agent_id, tool, project, session_id,
                   written_at, embedding, token_count, flags)
SELECT scope_id, episode_id, source_entity, target_entity, relation, text, confidence,
       causal_hint, hint_origin, %(now)s, %(supersedes)s, agent_id, tool, project, session_id,
       %(now)s, embedding, token_count, flags
FROM facts WHERE id = %(copy_of)s
RETURNING id

-- name: current_of_agents
SELECT f.id, f.scope_id, s.name AS scope_name, f.text
FROM facts f JOIN scopes s ON s.id = f.scope_id
WHERE f.agent_id = ANY(%(agents)s::text[]) AND f.t_invalid IS NULL
ORDER BY f.scope_id, f.written_at, f.id

-- name: chains
WITH RECURSIVE chain AS (
    SELECT f.id AS head, f.id, f.scope_id, f.supersedes, f.agent_id, 0 AS depth
    FROM facts f WHERE f.scope_id = ANY(%(scope_ids)s::uuid[]) AND f.id = ANY(%(heads)s::uuid[])
    UNION ALL
    SELECT c.head, p.id, p.scope_id, p.supersedes, p.agent_id, c.depth + 1
    FROM chain c JOIN facts p ON p.scope_id = c.scope_id AND p.id = c.supersedes
)
SELECT head, id, agent_id FROM chain ORDER BY head, depth

-- name: distilled_by
SELECT episode_id FROM episode_distillations WHERE agent_id = %(agent)s ORDER BY distilled_at, episode_id

-- name: release_distilled
DELETE FROM episode_distillations WHERE agent_id = %(agent)s RETURNING episode_id
