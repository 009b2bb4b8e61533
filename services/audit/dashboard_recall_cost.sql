-- Recall cost per agent and day: reads that searched a readable scope, and what they returned
-- from readable scopes only (a read that also searched another scope counts its items here, not
-- that scope's). Tokens are the returned items' stored token counts.
WITH r AS (
    SELECT r.id, r.agent_id, r.created_at FROM reads r
    WHERE r.scopes && %(scope_names)s::text[]
      AND (%(agent)s::text IS NULL OR r.agent_id = %(agent)s::text)
      AND (%(since)s::timestamptz IS NULL OR r.created_at >= %(since)s::timestamptz)
      AND (%(until)s::timestamptz IS NULL OR r.created_at < %(until)s::timestamptz)
), items AS (
    SELECT rr.read_id, rr.item_kind, coalesce(f.token_count, e.token_count) AS tokens
    FROM read_results rr
    JOIN r ON r.id = rr.read_id
    LEFT JOIN facts f ON rr.item_kind = 'fact' AND f.id = rr.item_id AND f.scope_id = ANY(%(scope_ids)s::uuid[])
    LEFT JOIN episodes e ON rr.item_kind = 'episode' AND e.id = rr.item_id AND e.scope_id = ANY(%(scope_ids)s::uuid[])
    WHERE f.id IS NOT NULL OR e.id IS NOT NULL
), per_read AS (
    SELECT r.id, r.agent_id, r.created_at,
           count(i.read_id) FILTER (WHERE i.item_kind = 'fact') AS facts,
           count(i.read_id) FILTER (WHERE i.item_kind = 'episode') AS episodes,
           coalesce(sum(i.tokens), 0) AS tokens
    FROM r LEFT JOIN items i ON i.read_id = r.id
    GROUP BY r.id, r.agent_id, r.created_at
)
SELECT agent_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
       count(*) AS reads, count(*) FILTER (WHERE facts + episodes > 0) AS with_results,
       sum(facts)::bigint AS facts, sum(episodes)::bigint AS episodes, sum(tokens)::bigint AS tokens,
       max(created_at) AS last_read
FROM per_read
GROUP BY agent_id, day
ORDER BY agent_id, day
