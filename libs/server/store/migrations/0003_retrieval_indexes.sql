-- Schema v3: what retrieval needs beyond v1 (issue 4).
--
-- 1. Lexical statistics per scope AND corpus (facts and searchable episodes are ranked as two
--    BM25 corpora: a one-line fact and a chat turn have different lengths and vocabularies).
--    They are maintained by AFTER INSERT statement triggers, so every write transaction updates
--    them atomically without the writes code knowing; `echo-memory reindex` rebuilds them.
--    `format_version` names how they were computed (1 = to_tsvector('english'), document length
--    = number of lexeme positions). Code that expects another version treats them as stale and
--    falls back to ts_rank until a reindex, instead of silently misranking.
-- 2. HNSW indexes (cosine) for scopes large enough that an exact scan is too slow; the
--    retrieval service uses them with pgvector 0.8 iterative scans so the scope/validity filter
--    is applied before the top-k is cut.
-- 3. episodes.seq: a turn's position inside its session, so the neighbour channel can find the
--    turns around a hit.

ALTER TABLE lexical_stats ADD COLUMN IF NOT EXISTS corpus text NOT NULL DEFAULT 'facts'
    CHECK (corpus IN ('facts', 'episodes'));
ALTER TABLE lexical_stats DROP CONSTRAINT IF EXISTS lexical_stats_pkey;
ALTER TABLE lexical_stats ADD PRIMARY KEY (scope_id, corpus);

ALTER TABLE lexical_df ADD COLUMN IF NOT EXISTS corpus text NOT NULL DEFAULT 'facts'
    CHECK (corpus IN ('facts', 'episodes'));
ALTER TABLE lexical_df DROP CONSTRAINT IF EXISTS lexical_df_pkey;
ALTER TABLE lexical_df ADD PRIMARY KEY (scope_id, corpus, term);

ALTER TABLE episodes ADD COLUMN IF NOT EXISTS seq integer;
CREATE INDEX IF NOT EXISTS episodes_session_seq_idx
    ON episodes (scope_id, session_id, seq) WHERE seq IS NOT NULL;

CREATE INDEX IF NOT EXISTS facts_embedding_hnsw
    ON facts USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
CREATE INDEX IF NOT EXISTS episodes_embedding_hnsw
    ON episodes USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)
    WHERE kind <> 'write';

-- The BM25 document length of a tsvector: how many token positions it holds.
CREATE OR REPLACE FUNCTION echo_tsv_length(v tsvector) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)::integer FROM unnest(v) AS u
$$;

CREATE OR REPLACE FUNCTION echo_lexical_facts_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lexical_stats AS s (scope_id, corpus, doc_count, total_length, format_version, updated_at)
    SELECT n.scope_id, 'facts', count(*), sum(echo_tsv_length(n.tsv)), 1, now()
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
    INSERT INTO lexical_stats AS s (scope_id, corpus, doc_count, total_length, format_version, updated_at)
    SELECT n.scope_id, 'episodes', count(*), sum(echo_tsv_length(n.tsv)), 1, now()
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

DROP TRIGGER IF EXISTS facts_lexical_stats ON facts;
CREATE TRIGGER facts_lexical_stats AFTER INSERT ON facts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION echo_lexical_facts_inserted();
DROP TRIGGER IF EXISTS episodes_lexical_stats ON episodes;
CREATE TRIGGER episodes_lexical_stats AFTER INSERT ON episodes
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION echo_lexical_episodes_inserted();

-- Statistics for whatever an upgraded database already holds, so BM25 is right from the start.
DELETE FROM lexical_df;
DELETE FROM lexical_stats;
INSERT INTO lexical_stats (scope_id, corpus, doc_count, total_length, format_version)
SELECT scope_id, 'facts', count(*), sum(echo_tsv_length(tsv)), 1 FROM facts GROUP BY scope_id;
INSERT INTO lexical_stats (scope_id, corpus, doc_count, total_length, format_version)
SELECT scope_id, 'episodes', count(*), sum(echo_tsv_length(tsv)), 1 FROM episodes
WHERE kind <> 'write' GROUP BY scope_id;
INSERT INTO lexical_df (scope_id, corpus, term, df)
SELECT f.scope_id, 'facts', u.lexeme, count(*) FROM facts f, unnest(f.tsv) AS u GROUP BY f.scope_id, u.lexeme;
INSERT INTO lexical_df (scope_id, corpus, term, df)
SELECT e.scope_id, 'episodes', u.lexeme, count(*) FROM episodes e, unnest(e.tsv) AS u
WHERE e.kind <> 'write' GROUP BY e.scope_id, u.lexeme;
