"""SQL of erasure (forget.py). Every statement on a scoped table names scope_id; parameters:
`scope_id`, `fact_ids` / `entity_ids` / `episode_ids` / `documents` (id arrays), `needles` (texts whose
presence marks a row as holding the erased content, compared case-insensitively), `whole_scope`.
"""

from echo_memory.libs.server.store.scopes import SCOPE_WRITE_LOCK as SCOPE_WRITE_LOCK

# A needle test on a text expression, spelled out per column so no statement is assembled at run time:
# the needle as whole words, any case (every character but letters, digits and spaces escaped), so
# erasing "Ann" leaves "the annual report" alone.
_HOLDS = r"""EXISTS (SELECT 1 FROM unnest(%(needles)s::text[]) AS n(t)
        WHERE {col} ~* ('(^|[^[:alnum:]_])' || regexp_replace(n.t, '([^[:alnum:][:space:]])', '\\\1', 'g')
                        || '($|[^[:alnum:]_])'))"""

SCOPE_BY_NAME = "SELECT id, name, kind, owner_agent FROM scopes WHERE name = %s"
# A fact by its id: the row tells which scope it is in (the admin names facts org-wide).
FACT_BY_ID = """
SELECT f.id, f.scope_id, s.name, s.kind, s.owner_agent FROM facts f JOIN scopes s ON s.id = f.scope_id
WHERE f.id = %s
"""
ENTITY_BY_NAME = """
SELECT e.id FROM entities e WHERE e.scope_id = %(scope_id)s AND lower(e.name) = lower(%(name)s)
"""
ENTITY_BY_ALIAS = """
SELECT DISTINCT a.entity_id FROM entity_aliases a
WHERE a.scope_id = %(scope_id)s AND lower(a.alias) = lower(%(name)s)
"""
ENTITY_NAMES = """
SELECT e.name FROM entities e WHERE e.scope_id = %(scope_id)s AND e.id = ANY(%(entity_ids)s::uuid[])
UNION
SELECT a.alias FROM entity_aliases a WHERE a.scope_id = %(scope_id)s AND a.entity_id = ANY(%(entity_ids)s::uuid[])
"""
SCOPE_ENTITIES = "SELECT id FROM entities WHERE scope_id = %(scope_id)s"

# Facts that touch the entities, or whose text names them.
FACTS_OF_ENTITIES = f"""
SELECT f.id FROM facts f
WHERE f.scope_id = %(scope_id)s
  AND (f.source_entity = ANY(%(entity_ids)s::uuid[]) OR f.target_entity = ANY(%(entity_ids)s::uuid[])
       OR {_HOLDS.format(col="f.text")})
"""
SCOPE_FACTS = "SELECT id FROM facts WHERE scope_id = %(scope_id)s"
# Every version of the triples (source, relation, target) of the given facts.
TRIPLES_OF = """
SELECT DISTINCT f.id FROM facts f
JOIN facts k ON k.scope_id = f.scope_id AND k.source_entity = f.source_entity
            AND k.target_entity = f.target_entity AND lower(k.relation) = lower(f.relation)
WHERE f.scope_id = %(scope_id)s AND k.scope_id = %(scope_id)s AND k.id = ANY(%(fact_ids)s::uuid[])
ORDER BY f.id
"""
FACT_TEXTS = """
SELECT DISTINCT text FROM facts WHERE scope_id = %(scope_id)s AND id = ANY(%(fact_ids)s::uuid[])
"""
# Episodes holding the content: the write episodes that carried the facts, and every episode whose
# text holds a needle (or the whole scope). `keep` is true for a write episode some fact still
# names: its text is rewritten from those facts instead of deleted. An imported turn's origin
# (source, external_id) comes along so the log can name it by hash.
EPISODES = f"""
SELECT e.id,
       e.kind = 'write' AND EXISTS (SELECT 1 FROM facts r WHERE r.scope_id = %(scope_id)s AND r.episode_id = e.id
                                     AND NOT r.id = ANY(%(fact_ids)s::uuid[])) AS keep,
       e.metadata->>'source', e.metadata->>'external_id'
FROM episodes e
WHERE e.scope_id = %(scope_id)s
  AND (%(whole_scope)s
       OR e.id IN (SELECT f.episode_id FROM facts f WHERE f.scope_id = %(scope_id)s AND f.id = ANY(%(fact_ids)s::uuid[]))
       OR {_HOLDS.format(col="e.content")})
ORDER BY e.id
"""
ALIAS_COUNT = f"""
SELECT count(*) FROM entity_aliases a
WHERE a.scope_id = %(scope_id)s AND (a.entity_id = ANY(%(entity_ids)s::uuid[]) OR {_HOLDS.format(col="a.alias")})
"""
# Reads whose results named an erased fact or episode, or whose question holds a needle (or, for a
# whole scope, asked it): their question text is blanked; the rest of the log stays.
READS = f"""
SELECT r.id FROM reads r
WHERE r.query IS NOT NULL
  AND (EXISTS (SELECT 1 FROM read_results x WHERE x.read_id = r.id AND x.item_id = ANY(%(items)s::uuid[]))
       OR {_HOLDS.format(col="r.query")}
       OR (%(whole_scope)s AND (%(public_name)s = ANY(r.scopes) OR '*' = ANY(r.scopes))
           AND (%(owner)s::text IS NULL OR r.agent_id = %(owner)s)))
ORDER BY r.id
"""
READ_RESULTS_COUNT = "SELECT count(*) FROM read_results WHERE item_id = ANY(%(items)s::uuid[])"
SAVES = f"""
SELECT id FROM recall_saves WHERE fact_id = ANY(%(fact_ids)s::uuid[]) OR {_HOLDS.format(col="note")} ORDER BY id
"""
# Audit rows about the erased rows, or whose texts hold a needle, in the scope or org-wide.
AUDIT_ROWS = f"""
SELECT a.id FROM audit_log a
WHERE (a.scope_id = %(scope_id)s OR a.scope_id IS NULL)
  AND NOT coalesce(a.after ? 'erasure_id', false)
  AND ((%(whole_scope)s AND a.scope_id = %(scope_id)s)
       OR a.fact_id = ANY(%(fact_ids)s::uuid[]) OR a.entity_id = ANY(%(entity_ids)s::uuid[])
       OR (a.kind = 'digest_abstract_written' AND a.after->>'abstract_id' = ANY(%(abstracts)s::text[]))
       OR {_HOLDS.format(col="a.reason || ' ' || coalesce(a.before::text, '') || ' ' || coalesce(a.after::text, '')")})
ORDER BY a.id
"""
OUTBOX_ROWS = f"""
SELECT o.id FROM outbox o
WHERE o.payload->>'fact_id' = ANY(%(fact_ids)s::text[]) OR o.payload->>'supersedes' = ANY(%(fact_ids)s::text[])
   OR o.payload->>'save_id' = ANY(%(saves)s::text[]) OR o.payload->>'document_id' = ANY(%(documents)s::text[])
   OR (%(whole_scope)s AND o.payload->>'scope_id' = %(scope_id)s::text)
   OR {_HOLDS.format(col="o.payload::text")}
ORDER BY o.id
"""
# Consolidation's entity digests quote their member facts: every version of a digest about an
# erased entity, holding an erased fact or quoting the text goes (the next run builds it again).
DIGESTS = f"""
SELECT d.id FROM digests d
WHERE d.scope_id = %(scope_id)s
  AND (%(whole_scope)s OR d.subject_id = ANY(%(entity_ids)s::uuid[]) OR d.member_ids && %(fact_ids)s::uuid[]
       OR {_HOLDS.format(col="d.summary")})
ORDER BY d.id
"""
# Abstracts the user's model wrote of digests (migration 0020): those of a digest that goes, those
# citing an erased fact and those holding the text (a paraphrase may name an erased entity).
ABSTRACTS = f"""
SELECT a.id FROM digest_abstracts a
WHERE a.scope_id = %(scope_id)s
  AND (%(whole_scope)s OR a.digest_id = ANY(%(digests)s::uuid[]) OR a.cited_ids && %(fact_ids)s::uuid[]
       OR {_HOLDS.format(col="a.text")})
ORDER BY a.id
"""
TIER_MOVES_COUNT = "SELECT count(*) FROM tier_moves WHERE fact_id = ANY(%(fact_ids)s::uuid[])"
DOCUMENTS = f"SELECT d.id, d.content_hash FROM documents d WHERE {_HOLDS.format(col='d.content')} ORDER BY d.id"
IDEMPOTENCY_COUNT = f"""
SELECT count(*) FROM idempotency i
WHERE {_HOLDS.format(col="i.response::text")}
   OR EXISTS (SELECT 1 FROM unnest(%(fact_ids)s::text[]) AS x(id) WHERE strpos(i.response::text, x.id) > 0)
"""
STAGING_COUNT = f"SELECT count(*) FROM import_staging s WHERE {_HOLDS.format(col='s.record::text')}"
DEFERRED_COUNT = f"""
SELECT count(*) FROM deferred_mentions d
WHERE d.scope_id = %(scope_id)s
  AND (%(whole_scope)s OR {_HOLDS.format(col="d.mention || ' ' || d.candidates::text")}
       OR EXISTS (SELECT 1 FROM unnest(%(entity_ids)s::text[]) AS x(id) WHERE strpos(d.candidates::text, x.id) > 0))
"""
DISTILLATIONS_COUNT = f"""
SELECT count(*) FROM episode_distillations d
WHERE d.episode_id = ANY(%(episode_ids)s::uuid[]) OR {_HOLDS.format(col="coalesce(d.note, '')")}
"""

# ---- the erasure, in this order (foreign keys: read_results, saves and audit rows before facts,
# facts before their episodes and entities) ----------------------------------------------------------
BLANK_READS = "UPDATE reads SET query = NULL WHERE id = ANY(%(reads)s::uuid[])"
DELETE_READ_RESULTS = "DELETE FROM read_results WHERE item_id = ANY(%(items)s::uuid[])"
DELETE_SAVES = "DELETE FROM recall_saves WHERE id = ANY(%(saves)s::uuid[])"
# The tombstone keeps the row's id, time, kind and actor; its texts become the erasure's reason.
# Links to rows that stay (a fact or entity whose audit text merely named the erased content) stay.
TOMBSTONE_AUDIT = """
UPDATE audit_log
SET before = NULL,
    after = jsonb_build_object('erasure_id', %(erasure_id)s::text, 'fact_id', fact_id, 'entity_id', entity_id),
    reason = 'erased by ' || %(erasure_id)s::text || ': ' || %(reason)s,
    fact_id = CASE WHEN fact_id = ANY(%(fact_ids)s::uuid[]) THEN NULL ELSE fact_id END,
    entity_id = CASE WHEN entity_id = ANY(%(entity_ids)s::uuid[]) THEN NULL ELSE entity_id END
WHERE id = ANY(%(audit)s::bigint[])
"""
DELETE_OUTBOX = "DELETE FROM outbox WHERE id = ANY(%(outbox)s::bigint[])"
DELETE_IDEMPOTENCY = f"""
DELETE FROM idempotency i
WHERE {_HOLDS.format(col="i.response::text")}
   OR EXISTS (SELECT 1 FROM unnest(%(fact_ids)s::text[]) AS x(id) WHERE strpos(i.response::text, x.id) > 0)
"""
DELETE_STAGING = f"DELETE FROM import_staging s WHERE {_HOLDS.format(col='s.record::text')}"
DELETE_DEFERRED = f"""
DELETE FROM deferred_mentions d
WHERE d.scope_id = %(scope_id)s
  AND (%(whole_scope)s OR {_HOLDS.format(col="d.mention || ' ' || d.candidates::text")}
       OR EXISTS (SELECT 1 FROM unnest(%(entity_ids)s::text[]) AS x(id) WHERE strpos(d.candidates::text, x.id) > 0))
"""
DELETE_TIER_MOVES = "DELETE FROM tier_moves WHERE fact_id = ANY(%(fact_ids)s::uuid[])"
DELETE_FACT_TIERS = "DELETE FROM fact_tiers WHERE fact_id = ANY(%(fact_ids)s::uuid[])"
DELETE_ABSTRACTS = "DELETE FROM digest_abstracts WHERE scope_id = %(scope_id)s AND id = ANY(%(abstracts)s::uuid[])"
DELETE_DIGESTS = "DELETE FROM digests WHERE scope_id = %(scope_id)s AND id = ANY(%(digests)s::uuid[])"
DELETE_FACTS = "DELETE FROM facts WHERE scope_id = %(scope_id)s AND id = ANY(%(fact_ids)s::uuid[])"
# A write episode that still carries other facts keeps their lines only.
REWRITE_EPISODES = """
UPDATE episodes e
SET content = coalesce((SELECT string_agg(f.text, E'\\n' ORDER BY f.written_at, f.id) FROM facts f
                        WHERE f.scope_id = %(scope_id)s AND f.episode_id = e.id), '')
WHERE e.scope_id = %(scope_id)s AND e.id = ANY(%(rewritten)s::uuid[])
"""
UNLINK_EPISODES = """
UPDATE facts SET episode_id = NULL WHERE scope_id = %(scope_id)s AND episode_id = ANY(%(episode_ids)s::uuid[])
"""
DELETE_DISTILLATIONS = f"""
DELETE FROM episode_distillations d
WHERE d.episode_id = ANY(%(episode_ids)s::uuid[]) OR {_HOLDS.format(col="coalesce(d.note, '')")}
"""
DELETE_EPISODES = "DELETE FROM episodes WHERE scope_id = %(scope_id)s AND id = ANY(%(episode_ids)s::uuid[])"
DELETE_ALIASES = f"""
DELETE FROM entity_aliases a
WHERE a.scope_id = %(scope_id)s AND (a.entity_id = ANY(%(entity_ids)s::uuid[]) OR {_HOLDS.format(col="a.alias")})
"""
# Merge decisions naming an erased entity (their reasons may name it too) go with it.
DELETE_ENTITY_MERGES = """
DELETE FROM entity_merges
WHERE scope_id = %(scope_id)s
  AND (absorbed_id = ANY(%(entity_ids)s::uuid[]) OR surviving_id = ANY(%(entity_ids)s::uuid[]))
"""
DELETE_ENTITIES = "DELETE FROM entities WHERE scope_id = %(scope_id)s AND id = ANY(%(entity_ids)s::uuid[])"
DELETE_INGESTIONS = "DELETE FROM document_ingestions WHERE document_id = ANY(%(documents)s::uuid[])"
DELETE_DOCUMENTS = "DELETE FROM documents WHERE id = ANY(%(documents)s::uuid[])"
INSERT_ERASURE = """
INSERT INTO erasures (id, actor, erased_by, reason, ref, target_kind, target_id, scope_id, counts, erased_ids)
VALUES (%(erasure_id)s, %(actor)s, %(by)s, %(reason)s, %(ref)s, %(kind)s, %(target_id)s, %(scope_id)s,
        %(counts)s, %(erased_ids)s)
"""

# ---- search, log, finish ------------------------------------------------------------------------
SEARCH_ENTITIES = """
SELECT e.id::text, s.name, e.name FROM entities e JOIN scopes s ON s.id = e.scope_id
WHERE strpos(lower(e.name), lower(%(term)s)) > 0
   OR EXISTS (SELECT 1 FROM entity_aliases a WHERE a.entity_id = e.id AND a.scope_id = e.scope_id
              AND strpos(lower(a.alias), lower(%(term)s)) > 0)
ORDER BY s.name, e.name LIMIT %(limit)s
"""
SEARCH_FACTS = """
SELECT f.id::text, s.name, f.text, f.t_invalid IS NULL FROM facts f JOIN scopes s ON s.id = f.scope_id
WHERE strpos(lower(f.text), lower(%(term)s)) > 0
ORDER BY s.name, f.t_valid, f.id LIMIT %(limit)s
"""
ERASURE_LOG = """
SELECT e.id::text, e.erased_at, e.actor, e.erased_by, e.reason, e.ref, e.target_kind, e.target_id::text, s.name,
       e.counts, e.finished_at
FROM erasures e JOIN scopes s ON s.id = e.scope_id
ORDER BY e.erased_at DESC, e.id LIMIT %s
"""
ERASURE_BY_ID = "SELECT erased_ids, scope_id::text, target_kind FROM erasures WHERE id = %s"
MARK_FINISHED = "UPDATE erasures SET finished_at = now() WHERE id = %s"
AGE_INSTALLED = "SELECT 1 FROM pg_extension WHERE extname = 'age'"
AGE_GRAPH_EXISTS = "SELECT 1 FROM ag_catalog.ag_graph WHERE name = 'echo_memory'"
AGE_SESSION = ("SELECT 'null'::ag_catalog.agtype", 'SET LOCAL search_path = ag_catalog, "$user", public')
# The statements follow services/reindex/graph_mirror.py's (map patterns bound to one agtype parameter).
AGE_DELETE_FACT_EDGE = """
SELECT * FROM ag_catalog.cypher('echo_memory', $$
  MATCH ()-[r:FACT {id: $id}]->() DELETE r
$$, %s) AS (r ag_catalog.agtype)
"""
AGE_DELETE_ENTITY = """
SELECT * FROM ag_catalog.cypher('echo_memory', $$
  MATCH (n:Entity {id: $id}) DETACH DELETE n
$$, %s) AS (n ag_catalog.agtype)
"""
AGE_DELETE_SCOPE = """
SELECT * FROM ag_catalog.cypher('echo_memory', $$
  MATCH (n:Entity {scope: $scope}) DETACH DELETE n
$$, %s) AS (n ag_catalog.agtype)
"""
