"""Each scope's full-dump size: the tokens of its current facts, kept by migration 0027's triggers.

A full dump is every current fact of the scopes read pasted whole, the alternative to recall.
`fact_token_totals` holds its size per scope, so reading it is one row a scope; a scope without a
row holds no current fact with tokens. Recall and the dashboard read it through `full_dump_tokens`;
a restore that suspends the insert trigger recomputes its scopes' totals here.
"""

from __future__ import annotations

from typing import Any

import psycopg

BY_STORED_NAMES = """
SELECT coalesce(sum(t.active_tokens), 0)::bigint
FROM fact_token_totals t JOIN scopes s ON s.id = t.scope_id
WHERE s.name = ANY(%(names)s)
"""
DELETE_TOTAL = "DELETE FROM fact_token_totals WHERE scope_id = %(scope_id)s"
REBUILD_TOTAL = """
INSERT INTO fact_token_totals (scope_id, active_tokens)
SELECT %(scope_id)s, sum(token_count) FROM facts WHERE scope_id = %(scope_id)s AND t_invalid IS NULL
HAVING count(*) > 0
"""


async def full_dump_tokens(conn: psycopg.AsyncConnection[Any], stored_names: list[str]) -> int:
    """Tokens of every current fact in the scopes with these stored names; 0 for none or unknown ones."""
    row = await (await conn.execute(BY_STORED_NAMES, {"names": stored_names})).fetchone()
    return int(row[0]) if row else 0


async def rebuild_scope_total(conn: psycopg.AsyncConnection[Any], scope_id: str) -> None:
    """Replace the scope's total by a sum over the facts it holds now."""
    params = {"scope_id": scope_id}
    await conn.execute(DELETE_TOTAL, params)
    await conn.execute(REBUILD_TOTAL, params)
