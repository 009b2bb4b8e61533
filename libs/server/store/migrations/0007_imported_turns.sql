-- Schema v7: agent-history import and the agent-side distillation of imported turns.
--
-- 1. An imported turn carries its origin in its metadata: `source` (the client, e.g. claude-code)
--    and `external_id` (the turn id libs/local/history/turns.py derives from source, conversation and
--    first message). The pair is unique in the store, so a re-import, a second run or two
--    importers racing store each turn once. Kept in metadata (not new columns) so that
--    export/restore carries it unchanged; the expression index enforces it all the same.
CREATE UNIQUE INDEX IF NOT EXISTS episodes_external_id_idx
    ON episodes ((metadata->>'source'), (metadata->>'external_id'))
    WHERE metadata ? 'external_id';
-- pending_episodes pages the imported turns of a scope oldest first.
CREATE INDEX IF NOT EXISTS episodes_imported_idx
    ON episodes (scope_id, (coalesce(occurred_at, written_at)), id)
    WHERE metadata ? 'external_id';

-- 2. An agent that distilled an imported turn into facts (or found nothing worth keeping) marks
--    it done once; pending_episodes stops listing it for every agent. Bookkeeping, not memory.
CREATE TABLE IF NOT EXISTS episode_distillations (
    episode_id   uuid PRIMARY KEY REFERENCES episodes (id),
    agent_id     text NOT NULL,
    fact_ids     uuid[] NOT NULL DEFAULT '{}',
    note         text,
    distilled_at timestamptz NOT NULL DEFAULT now()
);
