-- Schema v20: abstracts of digests, written by the user's own model (`echo-memory consolidate abstract`).
--
-- An abstract belongs to exactly one digest version: a rebuilt digest is a new row and starts with
-- none. The consolidation service stores one only after checking that every sentence cites member
-- facts of that version and that every number, date and name it holds occurs in a fact it cites.
-- It never touches a fact. Deleting a digest (an erasure) deletes its abstract with it; the erasure
-- also deletes abstracts that cite an erased fact or hold erased text, and tombstones their audit rows.
CREATE TABLE IF NOT EXISTS digest_abstracts (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    scope_id    uuid NOT NULL REFERENCES scopes (id),
    digest_id   uuid NOT NULL UNIQUE REFERENCES digests (id) ON DELETE CASCADE,
    text        text NOT NULL,                 -- the sentences joined, as shown
    token_count integer NOT NULL CHECK (token_count > 0),  -- what quoting it costs a brief's budget
    sentences   jsonb NOT NULL,                -- [{"text": ..., "cites": [fact id, ...]}, ...] in order
    cited_ids   uuid[] NOT NULL,               -- every fact a sentence cites, sorted (erasure finds them here)
    model       text NOT NULL,                 -- the model name the endpoint reported being asked
    written_by  text NOT NULL,                 -- the agent id of the caller that stored it
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS digest_abstracts_scope_idx ON digest_abstracts (scope_id, created_at DESC);
CREATE INDEX IF NOT EXISTS digest_abstracts_cited_idx ON digest_abstracts USING gin (cited_ids);
