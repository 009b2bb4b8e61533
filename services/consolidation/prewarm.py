"""After a run, the pages every hot search reads go back into Postgres' buffer cache.

A run over a large scope reads and writes far more than `shared_buffers` holds, so the hot tier's
indexes and the digests' leave the cache, and the first queries after it read those pages from
the operating system one by one. pg_prewarm reads them back in one pass. Where the server has no
pg_prewarm nothing is read, and relations that would not fit in the cache are left out; the
outcome says which: the search stays correct either way, only its first queries are slower.
"""

from __future__ import annotations

import logging

import psycopg

from echo_memory.libs.core.contracts.consolidation import Prewarm
from echo_memory.services.consolidation import queries as q

log = logging.getLogger(__name__)

# What a hot search reads on every query, most first: the dense search's index and rows, the
# digests' index, the lexical indexes and the corpus statistics. At 1M facts a pass with them
# evicted read 104k pages from the OS, 30-34k once they were read back (BENCHMARKS.md, run an).
HOT_RELATIONS = ("hot_facts_embedding_hnsw", "hot_facts", "digests_embedding_hnsw", "hot_facts_tsv_idx",
                 "digests_scope_tsv_idx", "hot_facts_scope_idx", "lexical_df", "lexical_df_pkey")
# Nearly the whole cache may go to them: when a run ends the cache holds the run's own pages, which
# serve nobody after it. A set larger than the cache would only push itself out.
CACHE_SHARE = 0.95


async def hot_pages(conn: psycopg.AsyncConnection) -> Prewarm:
    """Load HOT_RELATIONS into the buffer cache, in order, while they fit in CACHE_SHARE of it.

    Returns the pages read, the relations read and those left out; `unavailable` says why none
    were read (the database has no pg_prewarm, or reading failed: the run has committed by then,
    so a failure here is reported and logged, not raised). Runs outside the run's transaction.
    """
    try:
        return await _load(conn)
    except psycopg.Error as exc:
        log.warning("reading the hot search's pages back after a run failed: %s", exc)
        return Prewarm(unavailable=f"pg_prewarm failed ({exc.sqlstate}): {exc}")


async def _load(conn: psycopg.AsyncConnection) -> Prewarm:
    if not (await (await conn.execute(q.HAS_PREWARM)).fetchone())[0]:  # type: ignore[index]
        return Prewarm(unavailable="pg_prewarm is not installed in this database")
    rows = await (await conn.execute(q.RELATION_PAGES, {"relations": list(HOT_RELATIONS)})).fetchall()
    if not rows:
        return Prewarm()
    chosen, skipped = fit([(str(name), int(pages)) for name, pages, _ in rows], int(rows[0][2] * CACHE_SHARE))
    read = (await (await conn.execute(q.PREWARM, {"relations": chosen})).fetchone())[0] if chosen else 0  # type: ignore[index]
    return Prewarm(pages=int(read), relations=chosen, skipped=skipped)


def fit(sizes: list[tuple[str, int]], budget: int) -> tuple[list[str], list[str]]:
    """The relations taken in order while their pages add up to at most `budget`, and those left
    out (a later, smaller one may still fit after a larger one was left out)."""
    chosen: list[str] = []
    skipped: list[str] = []
    used = 0
    for name, pages in sizes:
        if used + pages <= budget:
            chosen.append(name)
            used += pages
        else:
            skipped.append(name)
    return chosen, skipped
