-- Schema v19: consolidation runs, the tier moves each made, and versioned entity and topic digests.
--
-- A run decides each fact's tier (hot, consolidated, archived: the facts.tier column that schema
-- v1 created) from what the store records, and writes one tier_moves row per change, so `consolidate
-- undo` can put every fact back. Fact content, vectors and edges are never rewritten: a move changes
-- only facts.tier. Digests are built from stored facts (no model) and versioned like facts: a changed
-- member set ends the current version (valid_to) and starts the next.
CREATE TABLE IF NOT EXISTS consolidation_runs (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    scope_id       uuid NOT NULL REFERENCES scopes (id),
    actor          text NOT NULL,
    policy_version integer NOT NULL,
    started_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    counts         jsonb NOT NULL DEFAULT '{}',
    undone_at      timestamptz
);
CREATE INDEX IF NOT EXISTS consolidation_runs_scope_idx ON consolidation_runs (scope_id, started_at DESC);

CREATE TABLE IF NOT EXISTS tier_moves (
    run_id    uuid NOT NULL REFERENCES consolidation_runs (id),
    fact_id   uuid NOT NULL REFERENCES facts (id),
    from_tier text NOT NULL CHECK (from_tier IN ('hot', 'consolidated', 'archived')),
    to_tier   text NOT NULL CHECK (to_tier IN ('hot', 'consolidated', 'archived')),
    reason    text NOT NULL,
    PRIMARY KEY (run_id, fact_id)
);
CREATE INDEX IF NOT EXISTS tier_moves_fact_idx ON tier_moves (fact_id);

CREATE TABLE IF NOT EXISTS digests (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    scope_id     uuid NOT NULL REFERENCES scopes (id),
    kind         text NOT NULL CHECK (kind IN ('entity', 'topic')),
    subject_id   uuid NOT NULL,                 -- the entity described; for a topic, an id derived from its first fact
    version      integer NOT NULL,
    valid_from   timestamptz NOT NULL DEFAULT now(),
    valid_to     timestamptz,
    member_ids   uuid[] NOT NULL,               -- the facts it summarises, sorted
    member_hash  text NOT NULL,                 -- sha256 of the sorted member ids
    summary      text NOT NULL,
    token_count  integer NOT NULL,
    projects     text[] NOT NULL DEFAULT '{}',  -- projects its members were written in
    first_seen   timestamptz NOT NULL,
    last_seen    timestamptz NOT NULL,
    embedding    vector(384) NOT NULL,          -- normalised mean of the members' stored vectors
    run_id       uuid NOT NULL REFERENCES consolidation_runs (id),
    ended_by_run uuid REFERENCES consolidation_runs (id),
    UNIQUE (scope_id, kind, subject_id, version)
);
CREATE INDEX IF NOT EXISTS digests_current_idx ON digests (scope_id, kind, subject_id) WHERE valid_to IS NULL;
CREATE INDEX IF NOT EXISTS facts_scope_tier_idx ON facts (scope_id, tier);
-- A hot-tier search finds the digests nearest the query through this index.
CREATE INDEX IF NOT EXISTS digests_embedding_hnsw ON digests USING hnsw (embedding vector_cosine_ops)
    WHERE valid_to IS NULL;
