-- Schema v2: bookkeeping the write path needs (issue 3). No memory table changes shape.

-- An idempotency key remembers what it was first used with, so the same key sent with
-- different arguments is refused instead of silently answered with an unrelated response.
ALTER TABLE idempotency ADD COLUMN IF NOT EXISTS request_hash text;

-- A project file's versions: one row per (project, path, content hash), never deleted. The
-- current version is the row with superseded_at IS NULL; current_since says when it (last)
-- became current, so content that changes back (A -> B -> A) is pending again for agents
-- that ingested A before B replaced it.
ALTER TABLE documents ADD COLUMN IF NOT EXISTS current_since timestamptz;
ALTER TABLE documents ADD COLUMN IF NOT EXISTS superseded_at timestamptz;
UPDATE documents SET current_since = registered_at WHERE current_since IS NULL;
-- Rows registered before v2: the newest version of each file is current, older ones ended
-- when the next one arrived.
WITH ordered AS (
    SELECT id, lead(registered_at) OVER (PARTITION BY project, path ORDER BY registered_at, id) AS next_at
    FROM documents
)
UPDATE documents d SET superseded_at = o.next_at
FROM ordered o WHERE d.id = o.id AND o.next_at IS NOT NULL AND d.superseded_at IS NULL;
ALTER TABLE documents ALTER COLUMN current_since SET DEFAULT now();
ALTER TABLE documents ALTER COLUMN current_since SET NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS documents_one_current_idx
    ON documents (project, path) WHERE superseded_at IS NULL;
