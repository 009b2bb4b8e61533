-- Schema v28: a hot fact's copy carries its validity, so a hot search filters without the facts table.
--
-- The hot search's lexical candidates are every `hot_facts` row holding the query's chosen words
-- (up to ~2,000), and each was looked up in `facts` only to check its scope and validity: three
-- index pages a row, more than half the statement's reads. The copy now holds `t_valid` and
-- `t_invalid` beside its scope, and a trigger keeps them equal to the fact's when a write ends
-- it (supersession, a post-hoc invalidation) or a bulk update dates it.
ALTER TABLE hot_facts ADD COLUMN IF NOT EXISTS t_valid timestamptz;
ALTER TABLE hot_facts ADD COLUMN IF NOT EXISTS t_invalid timestamptz;
UPDATE hot_facts h SET t_valid = f.t_valid, t_invalid = f.t_invalid FROM facts f
WHERE f.id = h.fact_id AND (h.t_valid IS DISTINCT FROM f.t_valid OR h.t_invalid IS DISTINCT FROM f.t_invalid);
ALTER TABLE hot_facts ALTER COLUMN t_valid SET NOT NULL;

-- Row by row, and only for a fact whose validity changed (a transition table of a bulk update
-- would copy every row, vectors included); a fact without a copy matches nothing.
CREATE OR REPLACE FUNCTION echo_hot_validity() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE hot_facts SET t_valid = NEW.t_valid, t_invalid = NEW.t_invalid WHERE fact_id = NEW.id;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS facts_hot_validity ON facts;
CREATE TRIGGER facts_hot_validity AFTER UPDATE OF t_valid, t_invalid ON facts
    FOR EACH ROW WHEN (OLD.t_valid IS DISTINCT FROM NEW.t_valid OR OLD.t_invalid IS DISTINCT FROM NEW.t_invalid)
    EXECUTE FUNCTION echo_hot_validity();
