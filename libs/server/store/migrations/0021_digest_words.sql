-- Schema v21: the words of a digest's members, so a hot search can reach consolidated facts by
-- the words of the query as well as by the digests' mean vectors.
--
-- A digest's `tsv` is the lexical vector (echo_lexical, as facts.tsv) of its members' texts joined
-- in id order: the same for a rebuilt digest as for the one it replaces. It is written with the
-- digest and never changed; an erasure deletes the digests that hold an erased fact, and their
-- words with them.
CREATE OR REPLACE FUNCTION echo_digest_lexical(member_ids uuid[]) RETURNS tsvector
LANGUAGE sql STABLE AS $$
    SELECT coalesce(echo_lexical(string_agg(f.text, E'\n' ORDER BY f.id)), ''::tsvector)
    FROM facts f WHERE f.id = ANY(member_ids)
$$;

ALTER TABLE digests ADD COLUMN IF NOT EXISTS tsv tsvector;
UPDATE digests SET tsv = echo_digest_lexical(member_ids) WHERE tsv IS NULL;
ALTER TABLE digests ALTER COLUMN tsv SET NOT NULL;
CREATE INDEX IF NOT EXISTS digests_scope_tsv_idx ON digests USING gin (scope_id, tsv) WHERE valid_to IS NULL;
