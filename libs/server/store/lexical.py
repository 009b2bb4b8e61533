"""BM25 statistics of one scope rebuilt from its stored rows.

The insert triggers of migration 0003 keep `lexical_stats` and `lexical_df` current row by row;
this recomputes them for one scope in four statements, for reindex and for a bulk restore that
suspends the triggers.
"""

from __future__ import annotations

from typing import Any

import psycopg

from echo_memory.libs.core.contracts.reindex import LEXICAL_FORMAT_VERSION

DELETE_DF = "DELETE FROM lexical_df WHERE scope_id = %(scope_id)s"
DELETE_STATS = "DELETE FROM lexical_stats WHERE scope_id = %(scope_id)s"
REBUILD_STATS = """
INSERT INTO lexical_stats (scope_id, corpus, doc_count, total_length, format_version)
SELECT %(scope_id)s, 'facts', count(*), coalesce(sum(echo_tsv_length(tsv)), 0), %(version)s
FROM facts WHERE scope_id = %(scope_id)s
UNION ALL
SELECT %(scope_id)s, 'episodes', count(*), coalesce(sum(echo_tsv_length(tsv)), 0), %(version)s
FROM episodes WHERE scope_id = %(scope_id)s AND kind <> 'write'
"""
REBUILD_DF = """
INSERT INTO lexical_df (scope_id, corpus, term, df)
SELECT %(scope_id)s, 'facts', u.lexeme, count(*) FROM facts f, unnest(f.tsv) AS u
WHERE f.scope_id = %(scope_id)s GROUP BY u.lexeme
UNION ALL
SELECT %(scope_id)s, 'episodes', u.lexeme, count(*) FROM episodes e, unnest(e.tsv) AS u
WHERE e.scope_id = %(scope_id)s AND e.kind <> 'write' GROUP BY u.lexeme
"""


async def rebuild_scope_statistics(conn: psycopg.AsyncConnection[Any], scope_id: str) -> None:
    """Replace the scope's statistics by counts over what it holds now (format LEXICAL_FORMAT_VERSION)."""
    params = {"scope_id": scope_id, "version": LEXICAL_FORMAT_VERSION}
    await conn.execute(DELETE_DF, params)
    await conn.execute(DELETE_STATS, params)
    await conn.execute(REBUILD_STATS, params)
    await conn.execute(REBUILD_DF, params)
