-- Schema v30: the facts touching an entity that hold given words, found in one index.
--
-- A hot search reaches a consolidated fact through the entity digests holding the query's rare
-- words, and keeps those of the digest's facts that hold them. It looked each member up by id to
-- check its words, and an entity digest holds every current fact of its entity: thousands at 1M
-- facts, most of that route's reads. This index answers "touching entity E and holding one of
-- these words" from the postings alone, so the route reads only the facts it keeps. The facts'
-- other word index leads with the scope and cannot narrow to an entity.
CREATE INDEX IF NOT EXISTS facts_entities_tsv_idx ON facts USING gin (source_entity, target_entity, tsv);
