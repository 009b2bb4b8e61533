"""SQL of export and import, one statement per section.

Export pages each section with a keyset (`k1`, `k2`[, `k3`]) so a page never rescans earlier
rows. Everything is filtered to the exported scopes (`scope_ids`) and to rows written at or
before the export's `cutoff`, so later pages never see rows the first page did not count; an
edge ended after the cutoff is exported as still active, as it was at the cutoff. `full` is true
only for a whole-org export: org-level rows (documents, unscoped audit rows) come only then.
"""

_KEY2 = "(%(first)s OR ({cols}) > (%(k1)s::timestamptz, %(k2)s::{t2}))"

# A one-scope export lists only the agents its rows name: the owner, writers, readers and savers.
_SCOPE_AGENTS = """
SELECT owner_agent FROM scopes WHERE id = ANY(%(scope_ids)s) AND owner_agent IS NOT NULL
UNION SELECT created_by FROM entities WHERE scope_id = ANY(%(scope_ids)s) AND created_at <= %(cutoff)s
UNION SELECT agent_id FROM episodes WHERE scope_id = ANY(%(scope_ids)s) AND written_at <= %(cutoff)s
UNION SELECT agent_id FROM facts WHERE scope_id = ANY(%(scope_ids)s) AND written_at <= %(cutoff)s
UNION SELECT agent_id FROM audit_log WHERE scope_id = ANY(%(scope_ids)s) AND created_at <= %(cutoff)s
UNION SELECT rs.agent_id FROM recall_saves rs JOIN facts f ON f.id = rs.fact_id
      WHERE f.scope_id = ANY(%(scope_ids)s) AND rs.created_at <= %(cutoff)s
UNION SELECT r.agent_id FROM reads r
      WHERE r.created_at <= %(cutoff)s AND (r.scopes && %(scope_names)s::text[]
            OR r.id IN (SELECT rs.read_id FROM recall_saves rs JOIN facts f ON f.id = rs.fact_id
                        WHERE f.scope_id = ANY(%(scope_ids)s)))
"""

SECTION_SQL: dict[str, str] = {
    "scope": """
SELECT id, name, kind, owner_agent, description, readers, writers, retention_days, created_at,
       (SELECT e.model FROM scope_embeddings e WHERE e.scope_id = scopes.id) AS embedding_model,
       created_at AS k1, id AS k2
FROM scopes
WHERE id = ANY(%(scope_ids)s) AND created_at <= %(cutoff)s
  AND """ + _KEY2.format(cols="created_at, id", t2="uuid") + """
ORDER BY created_at, id LIMIT %(limit)s
""",
    "agent": """
SELECT id, description, created_at, created_at AS k1, id AS k2
FROM agents
WHERE created_at <= %(cutoff)s
  AND (%(full)s OR id IN (""" + _SCOPE_AGENTS + """))
  AND """ + _KEY2.format(cols="created_at, id", t2="text") + """
ORDER BY created_at, id LIMIT %(limit)s
""",
    "entity": """
SELECT id, scope_id, name, type AS entity_type, embedding, created_by, created_at, created_at AS k1, id AS k2
FROM entities
WHERE scope_id = ANY(%(scope_ids)s) AND created_at <= %(cutoff)s
  AND """ + _KEY2.format(cols="created_at, id", t2="uuid") + """
ORDER BY created_at, id LIMIT %(limit)s
""",
    "alias": """
SELECT entity_id, scope_id, alias, created_at, created_at AS k1, entity_id AS k2, alias AS k3
FROM entity_aliases
WHERE scope_id = ANY(%(scope_ids)s) AND created_at <= %(cutoff)s
  AND (%(first)s OR (created_at, entity_id, alias) > (%(k1)s::timestamptz, %(k2)s::uuid, %(k3)s::text))
ORDER BY created_at, entity_id, alias LIMIT %(limit)s
""",
    # A merge undone after the cutoff is exported as still in force, as it was at the cutoff.
    "entity_merge": """
SELECT id, scope_id, absorbed_id, surviving_id, merged_by, merged_at, reason,
       CASE WHEN undone_at <= %(cutoff)s THEN undone_by END AS undone_by,
       CASE WHEN undone_at <= %(cutoff)s THEN undone_at END AS undone_at,
       CASE WHEN undone_at <= %(cutoff)s THEN undo_reason END AS undo_reason,
       merged_at AS k1, id AS k2
FROM entity_merges
WHERE scope_id = ANY(%(scope_ids)s) AND merged_at <= %(cutoff)s
  AND """ + _KEY2.format(cols="merged_at, id", t2="bigint") + """
ORDER BY merged_at, id LIMIT %(limit)s
""",
    "episode": """
SELECT id, scope_id, kind, agent_id, tool, project, session_id, speaker, content, occurred_at, written_at,
       metadata, embedding, token_count, tier, seq, flags, written_at AS k1, id AS k2
FROM episodes
WHERE scope_id = ANY(%(scope_ids)s) AND written_at <= %(cutoff)s
  AND """ + _KEY2.format(cols="written_at, id", t2="uuid") + """
ORDER BY written_at, id LIMIT %(limit)s
""",
    "fact": """
SELECT id, scope_id, episode_id, source_entity, target_entity, relation, text, confidence, causal_hint,
       hint_origin, t_valid, CASE WHEN t_invalid <= %(cutoff)s THEN t_invalid END AS t_invalid, supersedes,
       agent_id, tool, project, session_id, written_at,
       coalesce((SELECT ft.tier FROM fact_tiers ft WHERE ft.fact_id = facts.id), 'hot') AS tier, access_count,
       last_read_at, embedding, token_count, flags, written_at AS k1, id AS k2
FROM facts
WHERE scope_id = ANY(%(scope_ids)s) AND written_at <= %(cutoff)s
  AND """ + _KEY2.format(cols="written_at, id", t2="uuid") + """
ORDER BY written_at, id LIMIT %(limit)s
""",
    "read": """
SELECT r.id, r.agent_id, r.tool, r.query, r.scopes, r.as_of, r.tokens, r.created_at,
       r.created_at AS k1, r.id AS k2
FROM reads r
WHERE r.created_at <= %(cutoff)s
  AND (%(full)s OR r.scopes && %(scope_names)s::text[]
       OR r.id IN (SELECT rs.read_id FROM recall_saves rs JOIN facts f ON f.id = rs.fact_id
                   WHERE f.scope_id = ANY(%(scope_ids)s)))
  AND """ + _KEY2.format(cols="r.created_at, r.id", t2="uuid") + """
ORDER BY r.created_at, r.id LIMIT %(limit)s
""",
    "read_result": """
SELECT rr.read_id, rr.item_id, rr.item_kind, rr.rank, rr.score, r.created_at AS k1, rr.read_id AS k2,
       rr.item_id::text AS k3
FROM read_results rr JOIN reads r ON r.id = rr.read_id
WHERE r.created_at <= %(cutoff)s
  AND (%(full)s
       OR EXISTS (SELECT 1 FROM facts f WHERE f.id = rr.item_id AND f.scope_id = ANY(%(scope_ids)s))
       OR EXISTS (SELECT 1 FROM episodes e WHERE e.id = rr.item_id AND e.scope_id = ANY(%(scope_ids)s)))
  AND (%(first)s OR (r.created_at, rr.read_id, rr.item_id) > (%(k1)s::timestamptz, %(k2)s::uuid, %(k3)s::uuid))
ORDER BY r.created_at, rr.read_id, rr.item_id LIMIT %(limit)s
""",
    "recall_save": """
SELECT rs.id, rs.fact_id, rs.read_id, rs.agent_id, rs.note, rs.created_at, rs.created_at AS k1, rs.id AS k2
FROM recall_saves rs JOIN facts f ON f.id = rs.fact_id
WHERE f.scope_id = ANY(%(scope_ids)s) AND rs.created_at <= %(cutoff)s
  AND """ + _KEY2.format(cols="rs.created_at, rs.id", t2="uuid") + """
ORDER BY rs.created_at, rs.id LIMIT %(limit)s
""",
    "document": """
SELECT id, project, path, content_hash, content, size, registered_at, current_since,
       CASE WHEN superseded_at <= %(cutoff)s THEN superseded_at END AS superseded_at,
       registered_at AS k1, id AS k2
FROM documents
WHERE %(full)s AND registered_at <= %(cutoff)s
  AND """ + _KEY2.format(cols="registered_at, id", t2="uuid") + """
ORDER BY registered_at, id LIMIT %(limit)s
""",
    "document_ingestion": """
SELECT document_id, agent_id, content_hash, ingested_at, ingested_at AS k1, document_id AS k2, agent_id AS k3
FROM document_ingestions
WHERE %(full)s AND ingested_at <= %(cutoff)s
  AND (%(first)s OR (ingested_at, document_id, agent_id) > (%(k1)s::timestamptz, %(k2)s::uuid, %(k3)s::text))
ORDER BY ingested_at, document_id, agent_id LIMIT %(limit)s
""",
    "audit": """
SELECT id, scope_id, kind, agent_id, session_id, tool, fact_id, entity_id, before, after, reason, post_hoc,
       created_at, created_at AS k1, id AS k2
FROM audit_log
WHERE (scope_id = ANY(%(scope_ids)s) OR (%(full)s AND scope_id IS NULL)) AND created_at <= %(cutoff)s
  AND """ + _KEY2.format(cols="created_at, id", t2="bigint") + """
ORDER BY created_at, id LIMIT %(limit)s
""",
}

# Counts per section at the cutoff, for the header (progress) — the same filters as above.
SECTION_COUNT: dict[str, str] = {
    name: "SELECT count(*) FROM (" + sql.replace("LIMIT %(limit)s", "") + ") x" for name, sql in SECTION_SQL.items()
}

TRANSACTION_NOW = "SELECT now()"

# The record fields that hold each section's keyset (`k1`, `k2`[, `k3`] above), so an export can
# continue after the last record of a file cut short. A read result's `k1` is its read's time.
RESUME_KEY_FIELDS: dict[str, tuple[str, ...]] = {
    "scope": ("created_at", "id"), "agent": ("created_at", "id"), "entity": ("created_at", "id"),
    "alias": ("created_at", "entity_id", "alias"), "entity_merge": ("merged_at", "id"),
    "episode": ("written_at", "id"), "fact": ("written_at", "id"),
    "read": ("created_at", "id"), "read_result": ("read_id", "item_id"), "recall_save": ("created_at", "id"),
    "document": ("registered_at", "id"), "document_ingestion": ("ingested_at", "document_id", "agent_id"),
    "audit": ("created_at", "id"),
}
READ_CREATED_AT = "SELECT created_at FROM reads WHERE id = %(id)s::uuid"

# ---- import ------------------------------------------------------------------------------------

STAGE_CLEANUP = "DELETE FROM import_staging WHERE created_at < now() - interval '1 day'"
STAGE_LINE = """
INSERT INTO import_staging (import_id, line_no, record) VALUES (%s, %s, %s)
ON CONFLICT (import_id, line_no) DO UPDATE SET record = EXCLUDED.record
"""
STAGED_LINES = "SELECT line_no, record FROM import_staging WHERE import_id = %s ORDER BY line_no"
STAGE_DROP = "DELETE FROM import_staging WHERE import_id = %s"

SCOPE_BY_NAME = "SELECT id FROM scopes WHERE name = %s"
# Whether a scope already holds memory (import restores only into an empty scope).
SCOPE_HOLDS_MEMORY = """
SELECT EXISTS (SELECT 1 FROM entities WHERE scope_id = %(scope_id)s)
    OR EXISTS (SELECT 1 FROM facts WHERE scope_id = %(scope_id)s)
    OR EXISTS (SELECT 1 FROM episodes WHERE scope_id = %(scope_id)s)
    OR EXISTS (SELECT 1 FROM audit_log WHERE scope_id = %(scope_id)s)
"""
ORG_HOLDS_DOCUMENTS = "SELECT EXISTS (SELECT 1 FROM documents) OR EXISTS (SELECT 1 FROM audit_log WHERE scope_id IS NULL)"
# Ids of the file already present in the org: any hit means every id is remapped.
IDS_TAKEN = """
SELECT EXISTS (SELECT 1 FROM entities WHERE id = ANY(%(ids)s::uuid[]))
    OR EXISTS (SELECT 1 FROM facts WHERE id = ANY(%(ids)s::uuid[]))
    OR EXISTS (SELECT 1 FROM episodes WHERE id = ANY(%(ids)s::uuid[]))
    OR EXISTS (SELECT 1 FROM reads WHERE id = ANY(%(ids)s::uuid[]))
    OR EXISTS (SELECT 1 FROM recall_saves WHERE id = ANY(%(ids)s::uuid[]))
    OR EXISTS (SELECT 1 FROM documents WHERE id = ANY(%(ids)s::uuid[]))
    OR EXISTS (SELECT 1 FROM scopes WHERE id = ANY(%(ids)s::uuid[]))
"""
MERGE_IDS_TAKEN = "SELECT EXISTS (SELECT 1 FROM entity_merges WHERE id = ANY(%(ids)s::bigint[]))"
MERGE_SEQUENCE_CATCH_UP = """
SELECT setval(pg_get_serial_sequence('entity_merges', 'id'), greatest((SELECT max(id) FROM entity_merges), 1))
"""
AUDIT_IDS_TAKEN = "SELECT EXISTS (SELECT 1 FROM audit_log WHERE id = ANY(%(ids)s::bigint[]))"
AUDIT_SEQUENCE_CATCH_UP = """
SELECT setval(pg_get_serial_sequence('audit_log', 'id'), greatest((SELECT max(id) FROM audit_log), 1))
"""

INSERT_SCOPE = """
INSERT INTO scopes (id, name, kind, owner_agent, description, readers, writers, retention_days, created_at)
VALUES (%(id)s, %(name)s, %(kind)s, %(owner_agent)s, %(description)s, %(readers)s, %(writers)s,
        %(retention_days)s, %(created_at)s)
"""
# An existing empty scope takes the file's settings, so a re-export shows the same scope.
UPDATE_SCOPE = """
UPDATE scopes SET kind = %(kind)s, owner_agent = %(owner_agent)s, description = %(description)s,
       readers = %(readers)s, writers = %(writers)s, retention_days = %(retention_days)s, created_at = %(created_at)s
WHERE id = %(id)s
"""
INSERT_AGENT = """
INSERT INTO agents (id, description, created_at) VALUES (%(id)s, %(description)s, %(created_at)s)
ON CONFLICT (id) DO NOTHING
"""
INSERT_ENTITY = """
INSERT INTO entities (id, scope_id, name, type, embedding, created_by, created_at)
VALUES (%(id)s, %(scope_id)s, %(name)s, %(entity_type)s, %(embedding)s, %(created_by)s, %(created_at)s)
"""
INSERT_ALIAS = """
INSERT INTO entity_aliases (entity_id, scope_id, alias, created_at)
VALUES (%(entity_id)s, %(scope_id)s, %(alias)s, %(created_at)s)
"""
INSERT_MERGE_KEEP_ID = """
INSERT INTO entity_merges (id, scope_id, absorbed_id, surviving_id, merged_by, merged_at, reason, undone_by,
                           undone_at, undo_reason)
OVERRIDING SYSTEM VALUE
VALUES (%(id)s, %(scope_id)s, %(absorbed_id)s, %(surviving_id)s, %(merged_by)s, %(merged_at)s, %(reason)s,
        %(undone_by)s, %(undone_at)s, %(undo_reason)s)
"""
INSERT_MERGE_NEW_ID = """
INSERT INTO entity_merges (scope_id, absorbed_id, surviving_id, merged_by, merged_at, reason, undone_by,
                           undone_at, undo_reason)
VALUES (%(scope_id)s, %(absorbed_id)s, %(surviving_id)s, %(merged_by)s, %(merged_at)s, %(reason)s,
        %(undone_by)s, %(undone_at)s, %(undo_reason)s)
"""
INSERT_EPISODE = """
INSERT INTO episodes (id, scope_id, kind, agent_id, tool, project, session_id, speaker, content, occurred_at,
                      written_at, metadata, embedding, token_count, tier, seq, flags)
VALUES (%(id)s, %(scope_id)s, %(kind)s, %(agent_id)s, %(tool)s, %(project)s, %(session_id)s, %(speaker)s,
        %(content)s, %(occurred_at)s, %(written_at)s, %(metadata)s, %(embedding)s, %(token_count)s, %(tier)s,
        %(seq)s, %(flags)s)
"""
# A fact's tier is a row of its own unless hot (migration 0022).
INSERT_FACT = """
WITH fact AS (
    INSERT INTO facts (id, scope_id, episode_id, source_entity, target_entity, relation, text, confidence,
                       causal_hint, hint_origin, t_valid, t_invalid, supersedes, agent_id, tool, project, session_id,
                       written_at, access_count, last_read_at, embedding, token_count, flags)
    VALUES (%(id)s, %(scope_id)s, %(episode_id)s, %(source_entity)s, %(target_entity)s, %(relation)s, %(text)s,
            %(confidence)s, %(causal_hint)s, %(hint_origin)s, %(t_valid)s, %(t_invalid)s, %(supersedes)s,
            %(agent_id)s, %(tool)s, %(project)s, %(session_id)s, %(written_at)s, %(access_count)s,
            %(last_read_at)s, %(embedding)s, %(token_count)s, %(flags)s)
    RETURNING id
)
INSERT INTO fact_tiers (fact_id, tier) SELECT id, %(tier)s FROM fact WHERE %(tier)s <> 'hot'
"""
INSERT_READ = """
INSERT INTO reads (id, agent_id, tool, query, scopes, as_of, tokens, created_at)
VALUES (%(id)s, %(agent_id)s, %(tool)s, %(query)s, %(scopes)s, %(as_of)s, %(tokens)s, %(created_at)s)
"""
INSERT_READ_RESULT = """
INSERT INTO read_results (read_id, item_id, item_kind, rank, score)
VALUES (%(read_id)s, %(item_id)s, %(item_kind)s, %(rank)s, %(score)s)
"""
INSERT_SAVE = """
INSERT INTO recall_saves (id, fact_id, read_id, agent_id, note, created_at)
VALUES (%(id)s, %(fact_id)s, %(read_id)s, %(agent_id)s, %(note)s, %(created_at)s)
"""
INSERT_DOCUMENT = """
INSERT INTO documents (id, project, path, content_hash, content, size, registered_at, current_since, superseded_at)
VALUES (%(id)s, %(project)s, %(path)s, %(content_hash)s, %(content)s, %(size)s, %(registered_at)s,
        coalesce(%(current_since)s, %(registered_at)s), %(superseded_at)s)
"""
INSERT_INGESTION = """
INSERT INTO document_ingestions (document_id, agent_id, content_hash, ingested_at)
VALUES (%(document_id)s, %(agent_id)s, %(content_hash)s, %(ingested_at)s)
"""
INSERT_AUDIT_KEEP_ID = """
INSERT INTO audit_log (id, scope_id, kind, agent_id, session_id, tool, fact_id, entity_id, before, after, reason,
                       post_hoc, created_at)
OVERRIDING SYSTEM VALUE
VALUES (%(id)s, %(scope_id)s, %(kind)s, %(agent_id)s, %(session_id)s, %(tool)s, %(fact_id)s, %(entity_id)s,
        %(before)s, %(after)s, %(reason)s, %(post_hoc)s, %(created_at)s)
RETURNING id
"""
INSERT_AUDIT_NEW_ID = """
INSERT INTO audit_log (scope_id, kind, agent_id, session_id, tool, fact_id, entity_id, before, after, reason,
                       post_hoc, created_at)
VALUES (%(scope_id)s, %(kind)s, %(agent_id)s, %(session_id)s, %(tool)s, %(fact_id)s, %(entity_id)s,
        %(before)s, %(after)s, %(reason)s, %(post_hoc)s, %(created_at)s)
RETURNING id
"""
