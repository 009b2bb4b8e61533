-- Schema v22: a fact's tier lives beside the fact, not in its row.
--
-- A tier move used to UPDATE facts.tier: Postgres then wrote a new version of the whole row, which
-- every index of `facts` took in (the HNSW graph, the lexical GIN, the btrees). Loading rows into
-- those indexes costs ~3 ms of Postgres CPU a row at a million facts, and a store's first run moves
-- most of its facts out of the hot tier. Here a move inserts, changes or deletes one narrow row,
-- and the facts table (rows, vectors, indexes) is never written by consolidation.
--
-- A fact without a row is hot: writes add nothing here. ON DELETE CASCADE is a backstop; an
-- erasure deletes a fact's tier itself, as it does its tier moves.
CREATE TABLE IF NOT EXISTS fact_tiers (
    fact_id uuid PRIMARY KEY REFERENCES facts (id) ON DELETE CASCADE,
    tier    text NOT NULL CHECK (tier IN ('consolidated', 'archived'))
);
INSERT INTO fact_tiers (fact_id, tier) SELECT id, tier FROM facts WHERE tier <> 'hot' ON CONFLICT DO NOTHING;
DROP INDEX IF EXISTS facts_scope_tier_idx;
ALTER TABLE facts DROP COLUMN IF EXISTS tier;
