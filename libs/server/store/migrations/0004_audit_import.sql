-- Schema v4: what the audit service needs for paging, `why` and import (issue 5).
-- No memory table changes shape.

-- get_audit_log pages each readable scope oldest first with a (created_at, id) keyset.
CREATE INDEX IF NOT EXISTS audit_log_scope_created_idx ON audit_log (scope_id, created_at, id);
-- `why` finds how an entity was resolved, and every later version of a fact.
CREATE INDEX IF NOT EXISTS audit_log_entity_idx ON audit_log (entity_id) WHERE entity_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS facts_supersedes_idx ON facts (scope_id, supersedes) WHERE supersedes IS NOT NULL;
CREATE INDEX IF NOT EXISTS recall_saves_fact_idx ON recall_saves (fact_id);

-- An import arrives in chunks (a bus message is limited to ~1 MB) and is restored in ONE
-- transaction once every chunk is here, so a refused or interrupted import leaves no memory
-- rows behind. Bookkeeping, not memory: rows are deleted when the import commits, and chunks
-- older than a day are dropped by the next import.
CREATE TABLE IF NOT EXISTS import_staging (
    import_id  uuid NOT NULL,
    line_no    integer NOT NULL CHECK (line_no >= 0),
    record     jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (import_id, line_no)
);
CREATE INDEX IF NOT EXISTS import_staging_created_idx ON import_staging (created_at);
