"""SQL of the reindex service; every statement is bounded to one scope."""

from echo_memory.libs.server.store.scopes import (
    SCOPE_WRITE_LOCK as SCOPE_WRITE_LOCK,  # the same lock the writes service takes
)

# One cursor over the three embedded tables of a scope: (table rank, id).
COUNT_EMBEDDED = """
SELECT (SELECT count(*) FROM facts WHERE scope_id = %(scope_id)s)
     + (SELECT count(*) FROM episodes WHERE scope_id = %(scope_id)s AND kind <> 'write')
     + (SELECT count(*) FROM entities WHERE scope_id = %(scope_id)s)
"""
PAGE_EMBEDDED = """
SELECT * FROM (
    SELECT 1 AS t, id, text AS body FROM facts WHERE scope_id = %(scope_id)s
    UNION ALL
    SELECT 2, id, content FROM episodes WHERE scope_id = %(scope_id)s AND kind <> 'write'
    UNION ALL
    SELECT 3, id, name FROM entities WHERE scope_id = %(scope_id)s
) x
WHERE (x.t, x.id) > (%(after_t)s, %(after_id)s::uuid)
ORDER BY x.t, x.id
LIMIT %(limit)s
"""
UPDATE_EMBEDDING = {
    1: "UPDATE facts SET embedding = %(embedding)s WHERE scope_id = %(scope_id)s AND id = %(id)s",
    2: "UPDATE episodes SET embedding = %(embedding)s WHERE scope_id = %(scope_id)s AND id = %(id)s",
    3: "UPDATE entities SET embedding = %(embedding)s WHERE scope_id = %(scope_id)s AND id = %(id)s",
}
CORPUS_COUNTS = """
SELECT 'facts', (SELECT count(*) FROM facts WHERE scope_id = %(scope_id)s)
UNION ALL
SELECT 'episodes', (SELECT count(*) FROM episodes WHERE scope_id = %(scope_id)s AND kind <> 'write')
"""
STATS_OF_SCOPE = "SELECT corpus, doc_count, format_version FROM lexical_stats WHERE scope_id = %(scope_id)s"

COUNT_FACTS = "SELECT count(*) FROM facts WHERE scope_id = %(scope_id)s"
