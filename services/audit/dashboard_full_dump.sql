-- What pasting every fact valid now in the readable scopes would cost, in stored tokens.
SELECT coalesce(sum(f.token_count), 0)::bigint AS tokens FROM facts f
WHERE f.scope_id = ANY(%(scope_ids)s::uuid[]) AND f.t_invalid IS NULL
