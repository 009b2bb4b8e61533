"""Scope rows beyond access: the per-scope write lock and per-scope statistics.

Who may read or write a scope is decided in `echo_memory.libs.server.store.access`.
"""

from __future__ import annotations

# Serialises every change to one scope for the rest of the transaction (released at commit, so it
# also holds behind a transaction-pooling proxy). Writes, imports and reindex all take it.
SCOPE_WRITE_LOCK = "SELECT pg_advisory_xact_lock(hashtext('echo-memory:scope:' || %s::text))"

# Facts per scope (all versions and the active ones) and the last write: `echo-memory status` and
# the operator's MemoryScope status both report it.
SCOPE_STATS = """
SELECT s.name,
       count(f.id) AS facts,
       count(f.id) FILTER (WHERE f.t_invalid IS NULL) AS active_facts,
       max(f.written_at) AS last_write
FROM scopes s LEFT JOIN facts f ON f.scope_id = s.id
GROUP BY s.name ORDER BY s.name
"""

# Who wrote each scope: facts per agent (all versions and the active ones) and their last write,
# for `echo-memory status`.
SCOPE_WRITERS = """
SELECT s.name, f.agent_id,
       count(*) AS facts,
       count(*) FILTER (WHERE f.t_invalid IS NULL) AS active_facts,
       max(f.written_at) AS last_write
FROM facts f JOIN scopes s ON s.id = f.scope_id
GROUP BY s.name, f.agent_id ORDER BY s.name, max(f.written_at) DESC, f.agent_id
"""
