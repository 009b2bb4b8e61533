-- Schema v25: the hot tier gets indexes of its own.
--
-- A hot-tier search filtered the facts table's indexes by "no fact_tiers row", so its HNSW walk
-- and its lexical candidates passed over every consolidated and archived fact: the larger the
-- share of the store a run demotes, the more rows a hot search reads to find its own. Here the
-- hot facts a run has placed are copied (vector and lexemes) into `hot_facts`, with their own
-- HNSW and GIN indexes, so a hot search reads hot rows only.
--
-- A fact written since its scope's last run is hot but not yet copied: it waits in
-- `hot_pending` (a narrow row, so a write adds no vector index work), which the hot search reads
-- beside `hot_facts`, and the next run moves it over (or leaves it out, if it placed it lower).
-- The tier moves keep `hot_facts` exact by trigger: a fact given a fact_tiers row leaves it, a
-- fact whose row is deleted (promotion, undo) comes back. Both tables only repeat what the facts
-- table holds; ON DELETE CASCADE takes the copies with an erased fact.
CREATE TABLE IF NOT EXISTS hot_facts (
    fact_id    uuid PRIMARY KEY REFERENCES facts (id) ON DELETE CASCADE,
    scope_id   uuid NOT NULL,
    embedding  vector(384) NOT NULL,
    tsv        tsvector NOT NULL,
    tsv_length integer NOT NULL
);
CREATE INDEX IF NOT EXISTS hot_facts_embedding_hnsw
    ON hot_facts USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
CREATE INDEX IF NOT EXISTS hot_facts_tsv_idx ON hot_facts USING gin (tsv);
CREATE INDEX IF NOT EXISTS hot_facts_scope_idx ON hot_facts (scope_id);

CREATE TABLE IF NOT EXISTS hot_pending (
    fact_id  uuid PRIMARY KEY REFERENCES facts (id) ON DELETE CASCADE,
    scope_id uuid NOT NULL
);
CREATE INDEX IF NOT EXISTS hot_pending_scope_idx ON hot_pending (scope_id, fact_id);

CREATE OR REPLACE FUNCTION echo_hot_pending_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO hot_pending (fact_id, scope_id) SELECT n.id, n.scope_id FROM new_rows n ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS facts_hot_pending ON facts;
CREATE TRIGGER facts_hot_pending AFTER INSERT ON facts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION echo_hot_pending_added();

CREATE OR REPLACE FUNCTION echo_hot_left() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM hot_facts h USING new_rows n WHERE h.fact_id = n.fact_id;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS fact_tiers_hot_left ON fact_tiers;
CREATE TRIGGER fact_tiers_hot_left AFTER INSERT ON fact_tiers
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION echo_hot_left();

-- A fact erased with its tier row is gone from `facts` by the time this runs: the join finds nothing.
CREATE OR REPLACE FUNCTION echo_hot_back() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO hot_facts (fact_id, scope_id, embedding, tsv, tsv_length)
    SELECT f.id, f.scope_id, f.embedding, f.tsv, f.tsv_length FROM old_rows o JOIN facts f ON f.id = o.fact_id
    ON CONFLICT (fact_id) DO NOTHING;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS fact_tiers_hot_back ON fact_tiers;
CREATE TRIGGER fact_tiers_hot_back AFTER DELETE ON fact_tiers
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION echo_hot_back();

-- A re-embedded fact (reindex after a model change) keeps its copy in step.
CREATE OR REPLACE FUNCTION echo_hot_reembedded() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE hot_facts SET embedding = NEW.embedding WHERE fact_id = NEW.id;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS facts_hot_reembedded ON facts;
CREATE TRIGGER facts_hot_reembedded AFTER UPDATE OF embedding ON facts
    FOR EACH ROW EXECUTE FUNCTION echo_hot_reembedded();

-- What an upgraded database holds is hot and not yet copied: its next run copies what it keeps hot.
INSERT INTO hot_pending (fact_id, scope_id)
SELECT f.id, f.scope_id FROM facts f WHERE NOT EXISTS (SELECT 1 FROM fact_tiers ft WHERE ft.fact_id = f.id)
ON CONFLICT DO NOTHING;
