-- Schema v17: consolidation runs that failed.
--
-- A failed run rolls back everything it did, its consolidation_runs row included, so without this
-- table a run that failed every hour would leave no trace in the store, and `health` would read the
-- last good run as current. The scheduler records each failure here in a transaction of its own:
-- the error's code and message (never fact text), and when. scope_id is null for a failed sweep,
-- which had not reached a scope.
CREATE TABLE IF NOT EXISTS consolidation_failures (
    id        bigserial PRIMARY KEY,
    scope_id  uuid REFERENCES scopes (id) ON DELETE CASCADE,
    actor     text NOT NULL,
    failed_at timestamptz NOT NULL DEFAULT now(),
    code      text NOT NULL,
    message   text NOT NULL
);
CREATE INDEX IF NOT EXISTS consolidation_failures_time_idx ON consolidation_failures (failed_at DESC);
