-- Schema v1: the temporal graph, its evidence, and the bookkeeping around it.
-- Facts are never edited or deleted: a changed claim ends the active edge (t_invalid) and
-- starts a new one. Every table that holds memory carries scope_id, and every query filters
-- on it before ranking.

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE scopes (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name          text NOT NULL UNIQUE,
    kind          text NOT NULL CHECK (kind IN ('shared', 'solo', 'named')),
    owner_agent   text,
    description   text NOT NULL DEFAULT '',
    readers       text[] NOT NULL DEFAULT '{*}',
    writers       text[] NOT NULL DEFAULT '{*}',
    retention_days integer CHECK (retention_days IS NULL OR retention_days > 0),
    created_at    timestamptz NOT NULL DEFAULT now()
);
INSERT INTO scopes (name, kind, description)
VALUES ('shared', 'shared', 'Every agent of the org reads and writes here.');

CREATE TABLE agents (
    id          text PRIMARY KEY,
    description text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tokens (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    token_hash   text NOT NULL UNIQUE,          -- sha256 hex; the token itself is never stored
    prefix       text NOT NULL,                 -- first characters, so `token list` can name it
    agent_id     text NOT NULL REFERENCES agents (id),
    read_scopes  text[] NOT NULL,
    write_scopes text[] NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);

CREATE TABLE episodes (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    scope_id    uuid NOT NULL REFERENCES scopes (id),
    kind        text NOT NULL CHECK (kind IN ('write', 'turn', 'document', 'tool_call')),
    agent_id    text NOT NULL,
    tool        text,
    project     text,
    session_id  text,
    speaker     text,
    content     text NOT NULL,
    occurred_at timestamptz,
    written_at  timestamptz NOT NULL DEFAULT now(),
    metadata    jsonb NOT NULL DEFAULT '{}',
    embedding   vector(384),
    tsv         tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    token_count integer NOT NULL DEFAULT 0,
    tier        text NOT NULL DEFAULT 'hot' CHECK (tier IN ('hot', 'consolidated', 'archived'))
);
CREATE INDEX episodes_scope_idx ON episodes (scope_id, written_at);
CREATE INDEX episodes_tsv_idx ON episodes USING gin (tsv);

CREATE TABLE entities (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    scope_id    uuid NOT NULL REFERENCES scopes (id),
    name        text NOT NULL,
    type        text NOT NULL,
    embedding   vector(384),
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX entities_scope_name_idx ON entities (scope_id, lower(name));

CREATE TABLE entity_aliases (
    entity_id  uuid NOT NULL REFERENCES entities (id),
    scope_id   uuid NOT NULL REFERENCES scopes (id),
    alias      text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (entity_id, alias)
);
CREATE INDEX entity_aliases_lookup_idx ON entity_aliases (scope_id, lower(alias));

CREATE TABLE facts (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    scope_id      uuid NOT NULL REFERENCES scopes (id),
    episode_id    uuid REFERENCES episodes (id),
    source_entity uuid NOT NULL REFERENCES entities (id),
    target_entity uuid NOT NULL REFERENCES entities (id),
    relation      text NOT NULL,
    text          text NOT NULL,
    confidence    text NOT NULL CHECK (confidence IN ('extracted', 'inferred', 'ambiguous')),
    causal_hint   text CHECK (causal_hint IN ('caused_by', 'led_to', 'enabled_by', 'blocked_by', 'contradicts')),
    hint_origin   text CHECK (hint_origin IN ('write', 'post_hoc')),
    t_valid       timestamptz NOT NULL DEFAULT now(),
    t_invalid     timestamptz,
    supersedes    uuid REFERENCES facts (id),
    agent_id      text NOT NULL,
    tool          text,
    project       text,
    session_id    text,
    written_at    timestamptz NOT NULL DEFAULT now(),
    tier          text NOT NULL DEFAULT 'hot' CHECK (tier IN ('hot', 'consolidated', 'archived')),
    access_count  integer NOT NULL DEFAULT 0,
    last_read_at  timestamptz,
    embedding     vector(384) NOT NULL,
    tsv           tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    token_count   integer NOT NULL,
    CHECK (t_invalid IS NULL OR t_invalid >= t_valid)
);
-- At most one active edge per key: the database itself refuses a second one, whatever the code does.
CREATE UNIQUE INDEX facts_one_active_idx
    ON facts (scope_id, source_entity, target_entity, relation) WHERE t_invalid IS NULL;
CREATE INDEX facts_scope_valid_idx ON facts (scope_id, t_valid, t_invalid);
CREATE INDEX facts_source_idx ON facts (scope_id, source_entity);
CREATE INDEX facts_target_idx ON facts (scope_id, target_entity);
CREATE INDEX facts_tsv_idx ON facts USING gin (tsv);

CREATE TABLE audit_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope_id    uuid REFERENCES scopes (id),
    kind        text NOT NULL,
    agent_id    text NOT NULL,
    session_id  text,
    tool        text,
    fact_id     uuid REFERENCES facts (id),
    entity_id   uuid REFERENCES entities (id),
    before      jsonb,
    after       jsonb,
    reason      text NOT NULL,
    post_hoc    boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_created_idx ON audit_log (created_at, id);
CREATE INDEX audit_log_fact_idx ON audit_log (fact_id);

CREATE TABLE reads (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    agent_id    text NOT NULL,
    tool        text,
    query       text,
    scopes      text[] NOT NULL,
    as_of       timestamptz,
    tokens      integer NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE read_results (
    read_id   uuid NOT NULL REFERENCES reads (id),
    item_id   uuid NOT NULL,
    item_kind text NOT NULL CHECK (item_kind IN ('fact', 'episode')),
    rank      integer NOT NULL,
    score     real NOT NULL,
    PRIMARY KEY (read_id, item_id)
);
CREATE INDEX read_results_item_idx ON read_results (item_id);

CREATE TABLE recall_saves (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    fact_id    uuid NOT NULL REFERENCES facts (id),
    read_id    uuid REFERENCES reads (id),
    agent_id   text NOT NULL,
    note       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE documents (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project       text NOT NULL,
    path          text NOT NULL,
    content_hash  text NOT NULL,
    content       text NOT NULL,
    size          integer NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project, path, content_hash)
);

CREATE TABLE document_ingestions (
    document_id  uuid NOT NULL REFERENCES documents (id),
    agent_id     text NOT NULL,
    content_hash text NOT NULL,
    ingested_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, agent_id)
);

CREATE TABLE lexical_stats (
    scope_id       uuid PRIMARY KEY REFERENCES scopes (id),
    doc_count      bigint NOT NULL DEFAULT 0,
    total_length   bigint NOT NULL DEFAULT 0,
    format_version integer NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE lexical_df (
    scope_id uuid NOT NULL REFERENCES scopes (id),
    term     text NOT NULL,
    df       bigint NOT NULL,
    PRIMARY KEY (scope_id, term)
);

CREATE TABLE outbox (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind         text NOT NULL,
    payload      jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz
);
CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL;

CREATE TABLE idempotency (
    agent_id   text NOT NULL,
    key        text NOT NULL,
    response   jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, key)
);
