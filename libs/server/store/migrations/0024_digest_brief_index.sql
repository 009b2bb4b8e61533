-- Schema v24: the brief reads its digests from one index, without visiting the table.
--
-- Its order (areas, entity digests, topics; newest; largest) was an index over expressions of
-- `kind` and `member_ids`, so every row it read was fetched from the table, and a project's
-- digests were sorted with their member arrays detoasted: 6-11 ms a brief at 100k facts. The
-- order's rank and member count are now stored generated columns, and the index carries what the
-- brief reads and filters on (the subject, its size in tokens, its projects), so the brief's
-- first rows come from index entries alone, whatever the store's size.
ALTER TABLE digests ADD COLUMN IF NOT EXISTS brief_rank smallint
    GENERATED ALWAYS AS (CASE kind WHEN 'area' THEN 0 WHEN 'entity' THEN 1 ELSE 2 END) STORED;
ALTER TABLE digests ADD COLUMN IF NOT EXISTS member_count integer
    GENERATED ALWAYS AS (cardinality(member_ids)) STORED;
DROP INDEX IF EXISTS digests_brief_rank_idx;
CREATE INDEX IF NOT EXISTS digests_brief_idx
    ON digests (scope_id, brief_rank, last_seen DESC, member_count DESC, id)
    INCLUDE (subject_id, token_count, projects)
    WHERE valid_to IS NULL;
