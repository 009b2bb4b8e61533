-- Schema v5: what query_memory needs to stay fast at 100k facts (issue 4, latency).
-- No memory table changes meaning; two derived columns and one index.

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

-- 3. The statistics triggers read the stored length instead of recomputing it.
CREATE OR REPLACE FUNCTION echo_lexical_facts_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lexical_stats AS s (scope_id, corpus, doc_count, total_length, format_version, updated_at)
    SELECT n.scope_id, 'facts', count(*), sum(n.tsv_length), 1, now()
    FROM new_rows n GROUP BY n.scope_id
    ON CONFLICT (scope_id, corpus) DO UPDATE
        SET doc_count = s.doc_count + EXCLUDED.doc_count,
            total_length = s.total_length + EXCLUDED.total_length,
            updated_at = now();
    -- Terms in sorted order, so two concurrent writers lock lexical_df rows in the same order.
    INSERT INTO lexical_df AS d (scope_id, corpus, term, df)
    SELECT n.scope_id, 'facts', u.lexeme, count(*)
    FROM new_rows n, unnest(n.tsv) AS u
    GROUP BY n.scope_id, u.lexeme
    ORDER BY n.scope_id, u.lexeme
    ON CONFLICT (scope_id, corpus, term) DO UPDATE SET df = d.df + EXCLUDED.df;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION echo_lexical_episodes_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- 'write' episodes only repeat the text of the facts they carried; they are not searched.
    IF NOT EXISTS (SELECT 1 FROM new_rows n WHERE n.kind <> 'write') THEN
        RETURN NULL;
    END IF;
    INSERT INTO lexical_stats AS s (scope_id, corpus, doc_count, total_length, format_version, updated_at)
    SELECT n.scope_id, 'episodes', count(*), sum(n.tsv_length), 1, now()
    FROM new_rows n WHERE n.kind <> 'write' GROUP BY n.scope_id
    ON CONFLICT (scope_id, corpus) DO UPDATE
        SET doc_count = s.doc_count + EXCLUDED.doc_count,
            total_length = s.total_length + EXCLUDED.total_length,
            updated_at = now();
    INSERT INTO lexical_df AS d (scope_id, corpus, term, df)
    SELECT n.scope_id, 'episodes', u.lexeme, count(*)
    FROM new_rows n, unnest(n.tsv) AS u
    WHERE n.kind <> 'write'
    GROUP BY n.scope_id, u.lexeme
    ORDER BY n.scope_id, u.lexeme
    ON CONFLICT (scope_id, corpus, term) DO UPDATE SET df = d.df + EXCLUDED.df;
    RETURN NULL;
END $$;

-- 4. The searchable turns of a scope (everything but 'write' episodes, which only repeat their
--    facts' text). The dense channel's exact scan reads these rows only: a scope holding 100k
--    facts also holds ~2,000 write episodes, which it used to visit on every query.
CREATE INDEX IF NOT EXISTS episodes_searchable_idx ON episodes (scope_id, written_at) WHERE kind <> 'write';

-- 5. Full-text indexes that lead with the scope (btree_gin, a contrib module that ships with
--    Postgres). A plain GIN on tsv answers "which rows of the whole org contain 'alder'": a 1k-fact
--    scope beside a 100k-fact one read 19,070 postings to keep 180 (4 ms of 5).
CREATE EXTENSION IF NOT EXISTS btree_gin;
CREATE INDEX IF NOT EXISTS facts_scope_tsv_idx ON facts USING gin (scope_id, tsv);
CREATE INDEX IF NOT EXISTS episodes_scope_tsv_idx ON episodes USING gin (scope_id, tsv) WHERE kind <> 'write';
DROP INDEX IF EXISTS facts_tsv_idx;
DROP INDEX IF EXISTS episodes_tsv_idx;
