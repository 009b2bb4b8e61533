-- Schema v31: a fact waiting in `hot_pending` says whether a write put it there.
--
-- Between runs, the consolidation service copies newly written facts into `hot_facts` in small
-- batches, so a hot search keeps reading the hot tier's indexes rather than filtering the facts
-- table once more than a few thousand wait (at 1M facts, a run takes ~11 minutes and ~38k facts
-- waited meanwhile). Only facts a write added qualify: a fact back from an undo or from an upgrade
-- waits for the next run, which may place it lower again; copying ~800,000 of those one HNSW
-- insert at a time would be an hour of Postgres wasted. Rows already waiting count as not written.
ALTER TABLE hot_pending ADD COLUMN IF NOT EXISTS written boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS hot_pending_written_idx ON hot_pending (scope_id) WHERE written;
-- The copy empties the table's pages as fast as writes fill them, and autovacuum would then
-- truncate its empty tail under an exclusive lock, which a write's trigger insert waits for (seen
-- at 1M facts: 2 of 10,628 lock samples beside runs). Freed pages are reused instead.
ALTER TABLE hot_pending SET (vacuum_truncate = false);

CREATE OR REPLACE FUNCTION echo_hot_pending_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO hot_pending (fact_id, scope_id, written)
    SELECT n.id, n.scope_id, true FROM new_rows n ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
