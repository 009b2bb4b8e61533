-- Schema v27: each scope's full-dump size kept as facts are written, not summed when asked.
--
-- A recall reports what pasting every current fact of its scopes would have cost. Summing
-- `token_count` over a scope read every current fact: 835 ms of Postgres at a million facts,
-- paid inside whichever query came next. Triggers now keep the sum beside the scope: an insert
-- adds its current facts' tokens, an invalidation or an erasure subtracts its fact's. A statement
-- that changes no current fact's tokens touches no row here, so it takes no lock on the total.
CREATE TABLE IF NOT EXISTS fact_token_totals (
    scope_id      uuid PRIMARY KEY REFERENCES scopes (id) ON DELETE CASCADE,
    active_tokens bigint NOT NULL
);

CREATE OR REPLACE FUNCTION echo_fact_tokens_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Scopes in sorted order, so two concurrent writers lock rows in the same order.
    INSERT INTO fact_token_totals AS t (scope_id, active_tokens)
    SELECT n.scope_id, sum(n.token_count) FROM new_rows n WHERE n.t_invalid IS NULL
    GROUP BY n.scope_id HAVING sum(n.token_count) <> 0 ORDER BY n.scope_id
    ON CONFLICT (scope_id) DO UPDATE SET active_tokens = t.active_tokens + EXCLUDED.active_tokens;
    RETURN NULL;
END $$;

-- Row by row, and only when a current fact's tokens change: a transition table of a bulk update
-- (a benchmark dating a million facts back) would copy every row, vectors included, twice.
CREATE OR REPLACE FUNCTION echo_fact_tokens_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.t_invalid IS NULL THEN
        UPDATE fact_token_totals SET active_tokens = active_tokens - OLD.token_count WHERE scope_id = OLD.scope_id;
    END IF;
    IF NEW.t_invalid IS NULL THEN
        INSERT INTO fact_token_totals AS t (scope_id, active_tokens) VALUES (NEW.scope_id, NEW.token_count)
        ON CONFLICT (scope_id) DO UPDATE SET active_tokens = t.active_tokens + EXCLUDED.active_tokens;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION echo_fact_tokens_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE fact_token_totals t SET active_tokens = t.active_tokens - d.tokens
    FROM (SELECT o.scope_id, sum(o.token_count) AS tokens FROM old_rows o WHERE o.t_invalid IS NULL
          GROUP BY o.scope_id HAVING sum(o.token_count) <> 0) d
    WHERE t.scope_id = d.scope_id;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS facts_tokens_inserted ON facts;
CREATE TRIGGER facts_tokens_inserted AFTER INSERT ON facts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION echo_fact_tokens_inserted();
DROP TRIGGER IF EXISTS facts_tokens_updated ON facts;
CREATE TRIGGER facts_tokens_updated AFTER UPDATE OF t_invalid, token_count, scope_id ON facts
    FOR EACH ROW WHEN ((OLD.t_invalid IS NULL) <> (NEW.t_invalid IS NULL) OR OLD.token_count <> NEW.token_count
                       OR OLD.scope_id <> NEW.scope_id)
    EXECUTE FUNCTION echo_fact_tokens_updated();
DROP TRIGGER IF EXISTS facts_tokens_deleted ON facts;
CREATE TRIGGER facts_tokens_deleted AFTER DELETE ON facts
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION echo_fact_tokens_deleted();

-- What an upgraded database already holds.
DELETE FROM fact_token_totals;
INSERT INTO fact_token_totals (scope_id, active_tokens)
SELECT scope_id, sum(token_count) FROM facts WHERE t_invalid IS NULL GROUP BY scope_id;
