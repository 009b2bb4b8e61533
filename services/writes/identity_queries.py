"""SQL of the identity verbs (identity_admin.py). Every statement on a scoped table names scope_id."""

# Deferred mentions no later write answered, newest first, in the scopes given.
DEFERRED_WAITING = """
SELECT d.scope_id, s.name AS scope_name, d.agent_id, d.mention, d.candidates, d.times,
       d.first_deferred_at, d.last_deferred_at
FROM deferred_mentions d JOIN scopes s ON s.id = d.scope_id
WHERE d.scope_id = ANY(%(scope_ids)s) AND d.resolved_at IS NULL
ORDER BY d.last_deferred_at DESC, d.scope_id, d.agent_id, d.mention
LIMIT %(limit)s
"""

ENTITY_BY_ID = """
SELECT e.id, e.name, e.type, e.scope_id FROM entities e
WHERE e.scope_id = ANY(%(scope_ids)s) AND e.id = %(entity_id)s
"""
ENTITY_BY_NAME = """
SELECT e.id, e.name, e.type, e.scope_id FROM entities e
WHERE e.scope_id = %(scope_id)s AND lower(e.name) = lower(%(name)s)
"""
# Aliases are unique per scope when learned (entities.LEARN_ALIAS); the oldest entity wins otherwise.
ENTITY_BY_ALIAS = """
SELECT e.id, e.name, e.type, e.scope_id FROM entity_aliases a JOIN entities e ON e.id = a.entity_id
WHERE a.scope_id = %(scope_id)s AND e.scope_id = %(scope_id)s AND lower(a.alias) = lower(%(name)s)
ORDER BY e.created_at, e.id
LIMIT 1
"""
ALIASES_OF = """
SELECT alias, created_at FROM entity_aliases WHERE scope_id = %(scope_id)s AND entity_id = %(entity_id)s
ORDER BY created_at, alias
"""

# The merge in force that absorbed an entity, with the entity it was merged into.
ABSORBED_BY = """
SELECT m.id, m.surviving_id, e.name AS surviving_name FROM entity_merges m JOIN entities e ON e.id = m.surviving_id
WHERE m.scope_id = %(scope_id)s AND e.scope_id = %(scope_id)s AND m.absorbed_id = %(entity_id)s
  AND m.undone_at IS NULL
"""
INSERT_MERGE = """
INSERT INTO entity_merges (scope_id, absorbed_id, surviving_id, merged_by, reason)
VALUES (%(scope_id)s, %(absorbed_id)s, %(surviving_id)s, %(by)s, %(reason)s)
RETURNING id, merged_at
"""
# The merge in force by which `surviving_id` absorbed the entity named (name, alias or id) `alias`.
MERGE_TO_UNDO = """
SELECT m.id, m.absorbed_id, e.name, e.type FROM entity_merges m JOIN entities e ON e.id = m.absorbed_id
WHERE m.scope_id = %(scope_id)s AND e.scope_id = %(scope_id)s AND m.surviving_id = %(surviving_id)s
  AND m.undone_at IS NULL
  AND (lower(e.name) = lower(%(alias)s) OR e.id::text = lower(%(alias)s)
       OR EXISTS (SELECT 1 FROM entity_aliases a
                  WHERE a.scope_id = %(scope_id)s AND a.entity_id = e.id AND lower(a.alias) = lower(%(alias)s)))
ORDER BY m.merged_at, m.id
LIMIT 1
"""
UNDO_MERGE = """
UPDATE entity_merges SET undone_at = now(), undone_by = %(by)s, undo_reason = %(reason)s
WHERE id = %(merge_id)s AND scope_id = %(scope_id)s AND undone_at IS NULL
RETURNING undone_at
"""
# Facts in force naming an entity or anything it absorbed (the group that answers as it).
FACTS_OF_GROUP = """
WITH grp AS (
    SELECT %(entity_id)s::uuid AS id
    UNION
    SELECT c.entity_id FROM entity_canonical c WHERE c.scope_id = %(scope_id)s AND c.canonical_id = %(entity_id)s
)
SELECT count(*) FROM facts f
WHERE f.scope_id = %(scope_id)s AND f.t_invalid IS NULL
  AND (f.source_entity IN (SELECT id FROM grp) OR f.target_entity IN (SELECT id FROM grp))
"""

# Another entity of the scope answering to a name (as its name or an alias).
NAME_TAKEN = """
SELECT e.id, e.name FROM entities e
WHERE e.scope_id = %(scope_id)s AND e.id <> %(entity_id)s
  AND (lower(e.name) = lower(%(name)s)
       OR EXISTS (SELECT 1 FROM entity_aliases a
                  WHERE a.scope_id = %(scope_id)s AND a.entity_id = e.id AND lower(a.alias) = lower(%(name)s)))
LIMIT 1
"""
RENAME_ENTITY = """
UPDATE entities SET name = %(name)s WHERE id = %(entity_id)s AND scope_id = %(scope_id)s
"""
# The new name stops being an alias of its own entity (a name is never its own entity's alias).
DROP_OWN_ALIAS = """
DELETE FROM entity_aliases WHERE scope_id = %(scope_id)s AND entity_id = %(entity_id)s AND lower(alias) = lower(%(name)s)
"""
ADD_ALIAS = """
INSERT INTO entity_aliases (entity_id, scope_id, alias) VALUES (%(entity_id)s, %(scope_id)s, %(alias)s)
ON CONFLICT DO NOTHING
"""
# An entity's renames, newest first, to tell a rename back (an exact undo) from a new name.
RENAMES_OF = """
SELECT before, after FROM audit_log
WHERE scope_id = %(scope_id)s AND entity_id = %(entity_id)s AND kind = 'entity_renamed'
ORDER BY id DESC
"""
# Undoing a rename: the aliases become exactly the rows recorded before it (same text and time).
DROP_ALIASES = """
DELETE FROM entity_aliases WHERE scope_id = %(scope_id)s AND entity_id = %(entity_id)s
"""
RESTORE_ALIAS = """
INSERT INTO entity_aliases (entity_id, scope_id, alias, created_at)
VALUES (%(entity_id)s, %(scope_id)s, %(alias)s, %(created_at)s::timestamptz)
"""

# Person decisions for calibrate: each pair's latest merge, in force (one entity) or undone (two).
MERGE_DECISIONS = """
SELECT DISTINCT ON (m.absorbed_id, m.surviving_id)
       ab.name AS absorbed, ab.type AS absorbed_type, sv.name AS surviving, sv.type AS surviving_type,
       m.undone_at IS NOT NULL AS undone
FROM entity_merges m
JOIN entities ab ON ab.id = m.absorbed_id AND ab.scope_id = m.scope_id
JOIN entities sv ON sv.id = m.surviving_id AND sv.scope_id = m.scope_id
ORDER BY m.absorbed_id, m.surviving_id, m.merged_at DESC, m.id DESC
"""
