-- Schema v19: the session brief reads its first digests in order instead of sorting every digest.
--
-- The brief wants a scope's current digests entity first, then the most recently active, then the
-- largest; with this index it reads the first few hundred and stops, so its cost no longer grows
-- with the number of digests. A project's digests (a name, or the last part of a path, among the
-- projects its members were written in) are found through the two GIN indexes.
CREATE OR REPLACE FUNCTION echo_project_tails(projects text[]) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN ARRAY(SELECT regexp_replace(p, '^.*/', '') FROM unnest(projects) AS p);
CREATE INDEX IF NOT EXISTS digests_brief_order_idx
    ON digests (scope_id, (kind = 'entity') DESC, last_seen DESC, (cardinality(member_ids)) DESC, id)
    WHERE valid_to IS NULL;
CREATE INDEX IF NOT EXISTS digests_projects_idx ON digests USING gin (projects) WHERE valid_to IS NULL;
CREATE INDEX IF NOT EXISTS digests_project_tails_idx ON digests USING gin (echo_project_tails(projects))
    WHERE valid_to IS NULL;
