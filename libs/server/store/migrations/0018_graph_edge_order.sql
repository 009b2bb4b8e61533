-- Schema v18: the graph channel picks an entity's edges in id order, not in the order rows sit on disk.
--
-- The channel takes at most a few edges per frontier entity. Walking (scope_id, source_entity)
-- gave equal keys in heap order, so an UPDATE that moved a row (a consolidation tier move, the
-- end of a superseded version) or a restore changed which edges were taken, and with them the
-- ranking of the same query over the same facts (an `as_of` answer about a past instant included).
-- With the id in the index the walk is in id order: the same facts give the same edges.
CREATE INDEX IF NOT EXISTS facts_source_id_idx ON facts (scope_id, source_entity, id);
CREATE INDEX IF NOT EXISTS facts_target_id_idx ON facts (scope_id, target_entity, id);
DROP INDEX IF EXISTS facts_source_idx;
DROP INDEX IF EXISTS facts_target_idx;
