-- What pasting every fact valid now in the readable scopes would cost, in stored tokens
-- (kept per scope as facts are written: libs/server/store/fact_tokens.py).
SELECT coalesce(sum(t.active_tokens), 0)::bigint AS tokens FROM fact_token_totals t
WHERE t.scope_id = ANY(%(scope_ids)s::uuid[])
