-- Schema v32: the entity edges of every hot fact, for the graph channel's walks.
--
-- A hot search's graph neighbourhood walks each named entity's edges in id order and keeps the
-- hot ones: on the facts table, past every consolidated and archived edge of the entity, each
-- checked against `fact_tiers`. At 1M facts an entity the agents name often has thousands of edges,
-- nearly all consolidated, and that walk was the largest part of a search (26 ms p50, 106 ms p95).
-- `hot_edges` holds the entity pair of each fact with no fact_tiers row, with the walks' indexes,
-- so a hot walk reads hot edges only. Unlike `hot_facts` (which a run fills), it is kept exact by
-- trigger in the writing transaction: a write adds its facts' rows (three small index entries a
-- fact, no vector work), a fact leaving the hot tier takes its row out, one coming back (promotion,
-- undo) puts it back, and an erasure's cascade removes it. Facts' entities are never edited.
CREATE TABLE IF NOT EXISTS hot_edges (
    fact_id       uuid PRIMARY KEY REFERENCES facts (id) ON DELETE CASCADE,
    scope_id      uuid NOT NULL,
    source_entity uuid NOT NULL,
    target_entity uuid NOT NULL
);
CREATE INDEX IF NOT EXISTS hot_edges_source_idx ON hot_edges (scope_id, source_entity, fact_id);
CREATE INDEX IF NOT EXISTS hot_edges_target_idx ON hot_edges (scope_id, target_entity, fact_id);
-- A run's demotions empty many pages at once; autovacuum would truncate the empty tail under an
-- exclusive lock that a write's trigger insert waits for (as with `hot_pending`, migration 0031).
ALTER TABLE hot_edges SET (vacuum_truncate = false);

CREATE OR REPLACE FUNCTION echo_hot_edges_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO hot_edges (fact_id, scope_id, source_entity, target_entity)
    SELECT n.id, n.scope_id, n.source_entity, n.target_entity FROM new_rows n ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS facts_hot_edges ON facts;
CREATE TRIGGER facts_hot_edges AFTER INSERT ON facts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION echo_hot_edges_added();

CREATE OR REPLACE FUNCTION echo_hot_edges_left() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM hot_edges e USING new_rows n WHERE e.fact_id = n.fact_id;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS fact_tiers_hot_edges_left ON fact_tiers;
CREATE TRIGGER fact_tiers_hot_edges_left AFTER INSERT ON fact_tiers
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION echo_hot_edges_left();

-- An erased fact is gone from `facts` by the time this runs: the join finds nothing.
CREATE OR REPLACE FUNCTION echo_hot_edges_back() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO hot_edges (fact_id, scope_id, source_entity, target_entity)
    SELECT f.id, f.scope_id, f.source_entity, f.target_entity FROM old_rows o JOIN facts f ON f.id = o.fact_id
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS fact_tiers_hot_edges_back ON fact_tiers;
CREATE TRIGGER fact_tiers_hot_edges_back AFTER DELETE ON fact_tiers
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION echo_hot_edges_back();

INSERT INTO hot_edges (fact_id, scope_id, source_entity, target_entity)
SELECT f.id, f.scope_id, f.source_entity, f.target_entity FROM facts f
WHERE NOT EXISTS (SELECT 1 FROM fact_tiers ft WHERE ft.fact_id = f.id)
ON CONFLICT DO NOTHING;
ANALYZE hot_edges;
