-- Schema v28: a hot fact's copy says when it is visible, so a hot search filters without `facts`.
--
-- The hot search's lexical candidates are every `hot_facts` row holding the query's chosen words
-- (up to ~2,000), and each was looked up in `facts` only to check its scope and validity: three
-- index pages a row, more than half the statement's reads. A copy now holds its fact's validity
-- as it was when the run copied it (`visible_from`, `visible_until`). It never changes: a fact
-- whose validity changes (a new version ends it, a post-hoc invalidation, an update that dates
-- it) leaves `hot_facts` for `hot_pending`, read exactly against `facts`, until the next run
-- copies it again. Updating the copy instead would be an HNSW insert on the write path (a new
-- row version of a wide row), ~1 ms of Postgres at 9,000 copies and more as the graph grows.
--
-- Copies made before this migration get `-infinity`: a copy of a fact valid now and never ended
-- is visible to every search from now on, which is all a hot search asks (it is never `as_of`).
-- The constant default adds the column without rewriting the table or its HNSW index; the few
-- copies of facts not plainly current go back to `hot_pending`.
ALTER TABLE hot_facts ADD COLUMN IF NOT EXISTS visible_from timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE hot_facts ALTER COLUMN visible_from DROP DEFAULT;
ALTER TABLE hot_facts ADD COLUMN IF NOT EXISTS visible_until timestamptz;
WITH moved AS (
    DELETE FROM hot_facts h USING facts f
    WHERE f.id = h.fact_id AND h.visible_from = '-infinity' AND (f.t_valid > now() OR f.t_invalid IS NOT NULL)
    RETURNING h.fact_id, h.scope_id
)
INSERT INTO hot_pending (fact_id, scope_id) SELECT fact_id, scope_id FROM moved ON CONFLICT DO NOTHING;

CREATE OR REPLACE FUNCTION echo_hot_validity_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM hot_facts WHERE fact_id = NEW.id;
    IF FOUND THEN
        INSERT INTO hot_pending (fact_id, scope_id) VALUES (NEW.id, NEW.scope_id) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
-- Row by row, and only for a fact whose validity changed: a transition table of a bulk update
-- would copy every row, vectors included.
DROP TRIGGER IF EXISTS facts_hot_validity ON facts;
CREATE TRIGGER facts_hot_validity AFTER UPDATE OF t_valid, t_invalid ON facts
    FOR EACH ROW WHEN (OLD.t_valid IS DISTINCT FROM NEW.t_valid OR OLD.t_invalid IS DISTINCT FROM NEW.t_invalid)
    EXECUTE FUNCTION echo_hot_validity_changed();
