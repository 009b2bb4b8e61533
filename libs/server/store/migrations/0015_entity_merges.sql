-- Schema v15: a person fixes entity identity (`echo-memory entities merge|unmerge|rename`).
--
-- A merge is an identity redirect, never an edit of facts or entities: one row says the absorbed
-- entity answers as the surviving one from `merged_at` until `undone_at`. Facts keep the entity
-- ids they were written with; reads that resolve entities (query_memory's `about`, trace_cause,
-- the write path's entity resolution) follow the redirects in force, so undoing a merge
-- (setting undone_at) brings back exactly what was there before. The decisions are evidence for
-- `echo-memory calibrate`: a merge in force says "one entity", an undone one "two".
CREATE TABLE IF NOT EXISTS entity_merges (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope_id      uuid NOT NULL REFERENCES scopes (id),
    absorbed_id   uuid NOT NULL REFERENCES entities (id),
    surviving_id  uuid NOT NULL REFERENCES entities (id),
    merged_by     text NOT NULL,
    merged_at     timestamptz NOT NULL DEFAULT now(),
    reason        text NOT NULL,
    undone_by     text,
    undone_at     timestamptz,
    undo_reason   text,
    CHECK (absorbed_id <> surviving_id),
    CHECK ((undone_at IS NULL) = (undone_by IS NULL))
);
-- An entity is absorbed by at most one merge in force.
CREATE UNIQUE INDEX IF NOT EXISTS entity_merges_active_idx ON entity_merges (absorbed_id) WHERE undone_at IS NULL;
CREATE INDEX IF NOT EXISTS entity_merges_surviving_idx ON entity_merges (scope_id, surviving_id) WHERE undone_at IS NULL;

-- Every absorbed entity and the entity it answers as now, following chains (B into A, then A
-- into C: B answers as C). The merge verbs refuse to absorb into an absorbed entity, so chains
-- have no cycles; the depth bound only guards against a hand-edited table.
CREATE OR REPLACE VIEW entity_canonical AS
WITH RECURSIVE chain AS (
    SELECT m.scope_id, m.absorbed_id AS entity_id, m.surviving_id AS canonical_id, 1 AS depth
    FROM entity_merges m WHERE m.undone_at IS NULL
    UNION ALL
    SELECT c.scope_id, c.entity_id, m.surviving_id, c.depth + 1
    FROM chain c JOIN entity_merges m ON m.absorbed_id = c.canonical_id AND m.undone_at IS NULL
    WHERE c.depth < 64
)
SELECT DISTINCT ON (entity_id) scope_id, entity_id, canonical_id FROM chain ORDER BY entity_id, depth DESC;
