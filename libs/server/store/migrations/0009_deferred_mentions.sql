-- Schema v9: deferred mentions, so `health` can say how many writes wait for an agent's answer.
--
-- When write_episode defers a mention (it is close to an existing entity and the call did not say
-- which one it means), the facts naming it are not stored and the agent is asked to choose. One
-- row per (scope, agent, mention) remembers the question; a later stored write of that agent that
-- resolves the mention (entity_resolutions) records the answer. Bookkeeping, not memory: the facts
-- themselves are only ever written by the write that carries the answer.
CREATE TABLE IF NOT EXISTS deferred_mentions (
    scope_id         uuid NOT NULL REFERENCES scopes (id),
    agent_id         text NOT NULL,
    mention          text NOT NULL,
    candidates       jsonb NOT NULL,
    times            integer NOT NULL DEFAULT 1,
    first_deferred_at timestamptz NOT NULL DEFAULT now(),
    last_deferred_at timestamptz NOT NULL DEFAULT now(),
    resolved_at      timestamptz,
    resolution       text,         -- the entity id the agent chose, or 'new'
    PRIMARY KEY (scope_id, agent_id, mention)
);
CREATE INDEX IF NOT EXISTS deferred_mentions_waiting_idx ON deferred_mentions (scope_id) WHERE resolved_at IS NULL;
