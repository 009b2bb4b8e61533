-- Schema v5: what query_memory needs to stay fast at 100k facts (issue 4, latency).
-- No memory table changes meaning: two derived columns and four indexes.

-- 1. The BM25 document length (token positions, echo_tsv_length) stored with the row. Computing
--    it per candidate inside the scoring aggregate was most of the lexical channel's time at
--    100k facts (an SQL function call per candidate and query term). Generated from the same
--    expression as `tsv`, so it can never disagree with it.
ALTER TABLE facts ADD COLUMN IF NOT EXISTS tsv_length integer
    GENERATED ALWAYS AS (echo_tsv_length(to_tsvector('english', text))) STORED;
ALTER TABLE episodes ADD COLUMN IF NOT EXISTS tsv_length integer
    GENERATED ALWAYS AS (echo_tsv_length(to_tsvector('english', content))) STORED;

-- 2. digest (newest active facts of a scope) walks this index instead of sorting the scope.
CREATE INDEX IF NOT EXISTS facts_scope_written_idx ON facts (scope_id, written_at DESC, id);

-- 3. The searchable turns of a scope (everything but 'write' episodes, which only repeat their
--    facts' text). The dense channel's exact scan reads these rows only: a scope holding 100k
--    facts also holds ~2,000 write episodes, which it used to visit on every query.
CREATE INDEX IF NOT EXISTS episodes_searchable_idx ON episodes (scope_id, written_at) WHERE kind <> 'write';

-- 4. Full-text indexes that lead with the scope (btree_gin, a contrib module that ships with
--    Postgres). A plain GIN on tsv answers "which rows of the whole org contain 'alder'": a 1k-fact
--    scope beside a 100k-fact one read 19,070 postings to keep 180 (4 ms of 5).
CREATE EXTENSION IF NOT EXISTS btree_gin;
CREATE INDEX IF NOT EXISTS facts_scope_tsv_idx ON facts USING gin (scope_id, tsv);
CREATE INDEX IF NOT EXISTS episodes_scope_tsv_idx ON episodes USING gin (scope_id, tsv) WHERE kind <> 'write';
DROP INDEX IF EXISTS facts_tsv_idx;
DROP INDEX IF EXISTS episodes_tsv_idx;
