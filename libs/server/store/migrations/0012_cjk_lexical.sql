-- Schema v12: the lexical channel reads text without spaces (Chinese, Japanese, Korean).
--
-- to_tsvector('english') keeps a whole run of CJK characters as one lexeme, so a Chinese fact
-- could only match a query holding exactly the same sentence. `echo_lexical` keeps the english
-- lexemes of everything else and adds each CJK run's overlapping character pairs ('simple'
-- configuration, no stemming). Text without CJK characters gives exactly the tsvector it gave
-- before, so ranking of such text does not change. Statistics are recomputed as format 2.

CREATE OR REPLACE FUNCTION echo_cjk_bigrams(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(string_agg(
               CASE WHEN length(m.run[1]) = 1 THEN m.run[1] ELSE substr(m.run[1], i, 2) END, ' '
               ORDER BY m.n, i), '')
    FROM regexp_matches(t, '[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]+', 'g')
         WITH ORDINALITY AS m(run, n),
         generate_series(1, greatest(length(m.run[1]) - 1, 1)) AS i
$$;

CREATE OR REPLACE FUNCTION echo_lexical(t text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_tsvector('english',
                       regexp_replace(t, '[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]+', ' ', 'g'))
           || to_tsvector('simple', echo_cjk_bigrams(t))
$$;

-- The generated columns are re-made from the new expression (their indexes go with them).
ALTER TABLE facts DROP COLUMN tsv_length;
ALTER TABLE facts DROP COLUMN tsv;
ALTER TABLE facts ADD COLUMN tsv tsvector GENERATED ALWAYS AS (echo_lexical(text)) STORED;
ALTER TABLE facts ADD COLUMN tsv_length integer GENERATED ALWAYS AS (echo_tsv_length(echo_lexical(text))) STORED;
CREATE INDEX facts_scope_tsv_idx ON facts USING gin (scope_id, tsv);

ALTER TABLE episodes DROP COLUMN tsv_length;
ALTER TABLE episodes DROP COLUMN tsv;
ALTER TABLE episodes ADD COLUMN tsv tsvector GENERATED ALWAYS AS (echo_lexical(content)) STORED;
ALTER TABLE episodes ADD COLUMN tsv_length integer
    GENERATED ALWAYS AS (echo_tsv_length(echo_lexical(content))) STORED;
CREATE INDEX episodes_scope_tsv_idx ON episodes USING gin (scope_id, tsv) WHERE kind <> 'write';

CREATE OR REPLACE FUNCTION echo_lexical_facts_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lexical_stats AS s (scope_id, corpus, doc_count, total_length, format_version, updated_at)
    SELECT n.scope_id, 'facts', count(*), sum(echo_tsv_length(n.tsv)), 2, now()
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
    SELECT n.scope_id, 'episodes', count(*), sum(echo_tsv_length(n.tsv)), 2, now()
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

DELETE FROM lexical_df;
DELETE FROM lexical_stats;
INSERT INTO lexical_stats (scope_id, corpus, doc_count, total_length, format_version)
SELECT scope_id, 'facts', count(*), sum(tsv_length), 2 FROM facts GROUP BY scope_id;
INSERT INTO lexical_stats (scope_id, corpus, doc_count, total_length, format_version)
SELECT scope_id, 'episodes', count(*), sum(tsv_length), 2 FROM episodes WHERE kind <> 'write' GROUP BY scope_id;
INSERT INTO lexical_df (scope_id, corpus, term, df)
SELECT f.scope_id, 'facts', u.lexeme, count(*) FROM facts f, unnest(f.tsv) AS u GROUP BY f.scope_id, u.lexeme;
INSERT INTO lexical_df (scope_id, corpus, term, df)
SELECT e.scope_id, 'episodes', u.lexeme, count(*) FROM episodes e, unnest(e.tsv) AS u
WHERE e.kind <> 'write' GROUP BY e.scope_id, u.lexeme;
