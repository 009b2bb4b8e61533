"""SQL of the writes service's scope and token administration. Every statement on a scoped table names scope_id."""

from echo_memory.libs.server.store.scopes import SCOPE_WRITE_LOCK as SCOPE_WRITE_LOCK

_SCOPE_COLUMNS = """
SELECT s.id, s.name, s.kind, s.owner_agent, s.description, s.readers, s.writers, s.created_at,
       (SELECT count(*) FROM facts f WHERE f.scope_id = s.id) AS facts,
       (SELECT count(*) FROM facts f WHERE f.scope_id = s.id AND f.t_invalid IS NULL) AS active_facts,
       (SELECT count(*) FROM episodes e WHERE e.scope_id = s.id) AS episodes,
       (SELECT count(*) FROM entities n WHERE n.scope_id = s.id) AS entities
FROM scopes s
"""
SCOPE_LIST = _SCOPE_COLUMNS + "ORDER BY s.created_at, s.name"
SCOPE_BY_NAME = _SCOPE_COLUMNS + "WHERE s.name = %s"
# Existing scope names among the ones a grant lists (solo rows are never named in a grant).
EXISTING_SCOPES = "SELECT name FROM scopes WHERE name = ANY(%s)"

LIVE_TOKENS = """
SELECT id, prefix, agent_id, read_scopes, write_scopes, created_at, revoked_at
FROM tokens WHERE revoked_at IS NULL ORDER BY created_at, id
"""
TOKEN_BY_ID = """
SELECT id, prefix, agent_id, read_scopes, write_scopes, created_at, revoked_at
FROM tokens WHERE id = %s FOR UPDATE
"""
# The row is locked by TOKEN_BY_ID; the new grant lists are computed by the caller.
GRANT_TOKEN = """
UPDATE tokens SET read_scopes = %(read)s, write_scopes = %(write)s
WHERE id = %(id)s AND revoked_at IS NULL
RETURNING id, prefix, agent_id, read_scopes, write_scopes, created_at, revoked_at
"""
# A deleted scope's name leaves every live grant, so a later scope of the same name starts with no readers.
UNGRANT_SCOPE = """
UPDATE tokens SET read_scopes = array_remove(read_scopes, %(name)s), write_scopes = array_remove(write_scopes, %(name)s)
WHERE revoked_at IS NULL AND (%(name)s = ANY(read_scopes) OR %(name)s = ANY(write_scopes))
"""
# What an empty scope may still have: bookkeeping rows, deleted before the scope row itself.
DELETE_SCOPE_AUDIT = "DELETE FROM audit_log WHERE scope_id = %s"
DELETE_SCOPE_DEFERRED = "DELETE FROM deferred_mentions WHERE scope_id = %s"
DELETE_SCOPE_LEXICAL_DF = "DELETE FROM lexical_df WHERE scope_id = %s"
DELETE_SCOPE_LEXICAL_STATS = "DELETE FROM lexical_stats WHERE scope_id = %s"
DELETE_SCOPE_EMBEDDING_MODEL = "DELETE FROM scope_embeddings WHERE scope_id = %s"
DELETE_SCOPE = "DELETE FROM scopes WHERE id = %s AND kind = 'named'"
