-- Schema v26: a fact that comes back to the hot tier waits for a run to be copied.
--
-- Migration 0025 copied a fact into `hot_facts` the moment its fact_tiers row went: one HNSW
-- insert per fact, ~5 ms of Postgres CPU each. Undoing a million-fact store's first run puts
-- ~800,000 facts back in the hot tier, so the undo (one request) would have spent over an hour
-- inserting into the graph. The fact now goes to `hot_pending`, a narrow row, as a new write
-- does: a hot search reads it from there (exactly, or by filtering the facts table when many
-- wait), and the next run copies the ones it keeps hot. A promotion within a run is copied by
-- that same run, which moves its scope's pending facts after its tier moves.
CREATE OR REPLACE FUNCTION echo_hot_back() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- An erased fact is gone from `facts` by the time this runs: the join finds nothing.
    INSERT INTO hot_pending (fact_id, scope_id)
    SELECT f.id, f.scope_id FROM old_rows o JOIN facts f ON f.id = o.fact_id
    WHERE NOT EXISTS (SELECT 1 FROM hot_facts h WHERE h.fact_id = f.id)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
