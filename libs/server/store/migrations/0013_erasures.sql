-- Schema v13: erasure (`echo-memory forget`), the one audited exception to "never delete a fact".
--
-- 1. The erasure log: who erased what kind of target, why, under which ticket, and the ids of
--    every row that went (ids only: no text, name or vector). `restore` reads it so an export
--    taken before an erasure cannot bring the content back. `finished_at` is set once the
--    touched tables were vacuumed and the event stream's messages about the erased rows deleted.
CREATE TABLE IF NOT EXISTS erasures (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    erased_at   timestamptz NOT NULL DEFAULT now(),
    actor       text NOT NULL,
    erased_by   text NOT NULL,
    reason      text NOT NULL CHECK (reason <> ''),
    ref         text,
    target_kind text NOT NULL CHECK (target_kind IN ('fact', 'entity', 'scope')),
    target_id   uuid NOT NULL,
    scope_id    uuid NOT NULL REFERENCES scopes (id),
    counts      jsonb NOT NULL,
    erased_ids  jsonb NOT NULL,
    finished_at timestamptz
);
CREATE INDEX IF NOT EXISTS erasures_erased_at_idx ON erasures (erased_at, id);

-- 2. Lexical statistics follow deletes as they follow inserts (migration 0012's triggers), so an
--    erased fact or turn leaves no document frequency, length or term behind.
CREATE OR REPLACE FUNCTION echo_lexical_facts_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE lexical_stats s
    SET doc_count = s.doc_count - o.n, total_length = s.total_length - o.len, updated_at = now()
    FROM (SELECT scope_id, count(*) AS n, coalesce(sum(echo_tsv_length(tsv)), 0) AS len
          FROM old_rows GROUP BY scope_id) o
    WHERE s.scope_id = o.scope_id AND s.corpus = 'facts';
    UPDATE lexical_df d SET df = d.df - o.n
    FROM (SELECT r.scope_id, u.lexeme, count(*) AS n FROM old_rows r, unnest(r.tsv) AS u
          GROUP BY r.scope_id, u.lexeme ORDER BY r.scope_id, u.lexeme) o
    WHERE d.scope_id = o.scope_id AND d.corpus = 'facts' AND d.term = o.lexeme;
    DELETE FROM lexical_df d
    USING (SELECT DISTINCT r.scope_id, u.lexeme FROM old_rows r, unnest(r.tsv) AS u) o
    WHERE d.scope_id = o.scope_id AND d.corpus = 'facts' AND d.term = o.lexeme AND d.df <= 0;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION echo_lexical_episodes_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- 'write' episodes were never counted (echo_lexical_episodes_inserted).
    UPDATE lexical_stats s
    SET doc_count = s.doc_count - o.n, total_length = s.total_length - o.len, updated_at = now()
    FROM (SELECT scope_id, count(*) AS n, coalesce(sum(echo_tsv_length(tsv)), 0) AS len
          FROM old_rows WHERE kind <> 'write' GROUP BY scope_id) o
    WHERE s.scope_id = o.scope_id AND s.corpus = 'episodes';
    UPDATE lexical_df d SET df = d.df - o.n
    FROM (SELECT r.scope_id, u.lexeme, count(*) AS n FROM old_rows r, unnest(r.tsv) AS u
          WHERE r.kind <> 'write'
          GROUP BY r.scope_id, u.lexeme ORDER BY r.scope_id, u.lexeme) o
    WHERE d.scope_id = o.scope_id AND d.corpus = 'episodes' AND d.term = o.lexeme;
    DELETE FROM lexical_df d
    USING (SELECT DISTINCT r.scope_id, u.lexeme FROM old_rows r, unnest(r.tsv) AS u WHERE r.kind <> 'write') o
    WHERE d.scope_id = o.scope_id AND d.corpus = 'episodes' AND d.term = o.lexeme AND d.df <= 0;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS facts_lexical_deleted ON facts;
CREATE TRIGGER facts_lexical_deleted AFTER DELETE ON facts
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION echo_lexical_facts_deleted();
DROP TRIGGER IF EXISTS episodes_lexical_deleted ON episodes;
CREATE TRIGGER episodes_lexical_deleted AFTER DELETE ON episodes
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION echo_lexical_episodes_deleted();
