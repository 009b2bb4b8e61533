"""SQL of the writes service. Every statement on a scoped table names scope_id."""

from echo_memory.libs.server.store import embedding_models
from echo_memory.libs.server.store.scopes import (
    SCOPE_WRITE_LOCK as SCOPE_WRITE_LOCK,  # also used by batch_import and recall
)

# The write's episode row, and the scope's embedding model recorded if this is its first vector
# (libs/server/store/embedding_models.py): one round trip, and only for writes that store something.
INSERT_EPISODE = f"""
WITH recorded AS ({embedding_models.RECORD})
INSERT INTO episodes (scope_id, kind, agent_id, tool, project, session_id, content, token_count, metadata, flags)
VALUES (%(scope_id)s, 'write', %(agent_id)s, %(tool)s, %(project)s, %(session_id)s, %(content)s, %(tokens)s,
        %(metadata)s, %(flags)s)
RETURNING id
"""
# The row lock keeps the active edge ours until commit (the scope lock already serialises
# writers; this makes the edge safe against any other path that might end it).
ACTIVE_EDGE = """
SELECT id, relation, text, confidence, causal_hint FROM facts
WHERE scope_id = %(scope_id)s AND source_entity = %(source)s AND target_entity = %(target)s
  AND lower(relation) = lower(%(relation)s) AND t_invalid IS NULL
ORDER BY t_valid DESC, id
LIMIT 1
FOR UPDATE
"""
END_EDGE = """
UPDATE facts SET t_invalid = %(now)s WHERE id = %(id)s AND scope_id = %(scope_id)s AND t_invalid IS NULL
"""
INSERT_FACT = """
INSERT INTO facts (scope_id, episode_id, source_entity, target_entity, relation, text, confidence,
                   causal_hint, hint_origin, t_valid, supersedes, agent_id, tool, project, session_id,
                   written_at, embedding, token_count, flags)
VALUES (%(scope_id)s, %(episode_id)s, %(source)s, %(target)s, %(relation)s, %(text)s, %(confidence)s,
        %(causal_hint)s, %(hint_origin)s, %(now)s, %(supersedes)s, %(agent_id)s, %(tool)s, %(project)s,
        %(session_id)s, %(now)s, %(embedding)s, %(tokens)s, %(flags)s)
RETURNING id
"""
INSERT_AUDIT = """
INSERT INTO audit_log (scope_id, kind, agent_id, session_id, tool, fact_id, entity_id, before, after, reason,
                       post_hoc)
VALUES (%(scope_id)s, %(kind)s, %(agent_id)s, %(session_id)s, %(tool)s, %(fact_id)s, %(entity_id)s,
        %(before)s, %(after)s, %(reason)s, %(post_hoc)s)
"""
# Deferred mentions (migration 0009): the question asked, and the agent's later answer. Bookkeeping
# for `health` and calibration; the facts waiting on a mention are still never stored here.
RECORD_DEFERRAL = """
INSERT INTO deferred_mentions AS d (scope_id, agent_id, mention, candidates)
VALUES (%(scope_id)s, %(agent_id)s, %(mention)s, %(candidates)s)
ON CONFLICT (scope_id, agent_id, mention) DO UPDATE
    SET candidates = EXCLUDED.candidates, times = d.times + 1, last_deferred_at = now(),
        resolved_at = NULL, resolution = NULL
"""
RESOLVE_DEFERRALS = """
UPDATE deferred_mentions d SET resolved_at = now(), resolution = a.entity_id
FROM unnest(%(mentions)s::text[], %(entity_ids)s::text[]) AS a(mention, entity_id)
WHERE d.scope_id = %(scope_id)s AND d.agent_id = %(agent_id)s AND d.mention = a.mention
  AND d.resolved_at IS NULL
"""
INSERT_OUTBOX = "INSERT INTO outbox (kind, payload) VALUES (%s, %s)"
# The scope lock, then the wall clock read once it is held (not now(), the transaction's start: a
# writer that queued behind another must not end that writer's edge at a time before it began).
# One round trip: the materialised CTE runs, and so takes the lock, before the outer SELECT.
LOCK_SCOPE_THEN_NOW = f"""
WITH locked AS MATERIALIZED ({SCOPE_WRITE_LOCK})
SELECT clock_timestamp() FROM locked
"""
# The wall clock when no scope lock is taken (post_hoc.py: every fact named is missing, nothing is written).
CLOCK = "SELECT clock_timestamp()"
