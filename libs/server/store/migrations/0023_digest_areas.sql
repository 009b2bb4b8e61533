-- Schema v23: areas, a second level of digests above the topics.
--
-- An area groups topics that share an entity or a session and lie close in meaning; `parts` lists
-- the subject ids of the topic digests it groups (stable across their versions), and `member_ids`
-- stays the facts, so erasure, undo and rebuild checks treat an area like any other digest.
-- The brief reads areas first (the few top nodes of a large store), then entity digests, then the
-- topics no area holds; its order index follows that order, and a GIN index over the current
-- areas' parts finds whether a topic sits in one.
ALTER TABLE digests DROP CONSTRAINT IF EXISTS digests_kind_check;
ALTER TABLE digests ADD CONSTRAINT digests_kind_check CHECK (kind IN ('entity', 'topic', 'area'));
ALTER TABLE digests ADD COLUMN IF NOT EXISTS parts uuid[] NOT NULL DEFAULT '{}';
DROP INDEX IF EXISTS digests_brief_order_idx;
CREATE INDEX IF NOT EXISTS digests_brief_rank_idx
    ON digests (scope_id, (CASE kind WHEN 'area' THEN 0 WHEN 'entity' THEN 1 ELSE 2 END), last_seen DESC,
                (cardinality(member_ids)) DESC, id)
    WHERE valid_to IS NULL;
CREATE INDEX IF NOT EXISTS digests_area_parts_idx ON digests USING gin (scope_id, parts)
    WHERE valid_to IS NULL AND kind = 'area';
