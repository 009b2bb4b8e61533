-- Schema v6: which embedding model made a scope's vectors (issue 4, reindex after a model change).
--
-- A vector is only comparable with vectors of the same model. The first write that stores
-- vectors in a scope records the model that made them; a complete `echo-memory reindex` of the
-- scope records the model it re-embedded with. When the recorded model is not the one a
-- service embeds with, query_memory says so and names the reindex to run (a write never changes
-- the record, so a scope holding vectors of two models stays flagged until it is rebuilt).
CREATE TABLE IF NOT EXISTS scope_embeddings (
    scope_id    uuid PRIMARY KEY REFERENCES scopes (id),
    model       text NOT NULL CHECK (model <> ''),
    recorded_at timestamptz NOT NULL DEFAULT now()
);

-- Every vector stored before this migration came from the one model the code has shipped with.
INSERT INTO scope_embeddings (scope_id, model)
SELECT s.id, 'all-MiniLM-L6-v2-int8' FROM scopes s
WHERE EXISTS (SELECT 1 FROM facts f WHERE f.scope_id = s.id)
   OR EXISTS (SELECT 1 FROM episodes e WHERE e.scope_id = s.id)
   OR EXISTS (SELECT 1 FROM entities n WHERE n.scope_id = s.id)
ON CONFLICT (scope_id) DO NOTHING;
