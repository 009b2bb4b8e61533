-- Schema v28: a hot fact's copy says when it is visible, so a hot search filters without `facts`.
--
-- The hot search's lexical candidates are every `hot_facts` row holding the query's chosen words
-- (up to ~2,000), and each was looked up in `facts` only to check its scope and validity: three
-- index pages a row, more than half the statement's reads. A copy now holds its fact's validity
-- as it was when the run copied it (`visible_from`, `visible_until`), which the hot statements
-- filter on; they check the few rows they return against `facts`, so a fact ended or dated after
-- its copy was made is never returned. The copy is never updated: an update would be an HNSW
-- insert, and the write path never touches the hot tier's tables (so no write waits for a run).
--
-- Copies made before this migration get `-infinity`: a copy of a fact valid now and never ended
-- is visible to every search from now on, which is all a hot search asks (it is never `as_of`).
-- The constant default adds the column without rewriting the table or its HNSW index; the few
-- copies of facts not plainly current go back to `hot_pending`, and the next run copies them again.
ALTER TABLE hot_facts ADD COLUMN IF NOT EXISTS visible_from timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE hot_facts ALTER COLUMN visible_from DROP DEFAULT;
ALTER TABLE hot_facts ADD COLUMN IF NOT EXISTS visible_until timestamptz;
WITH moved AS (
    DELETE FROM hot_facts h USING facts f
    WHERE f.id = h.fact_id AND h.visible_from = '-infinity' AND (f.t_valid > now() OR f.t_invalid IS NOT NULL)
    RETURNING h.fact_id, h.scope_id
)
INSERT INTO hot_pending (fact_id, scope_id) SELECT fact_id, scope_id FROM moved ON CONFLICT DO NOTHING;
