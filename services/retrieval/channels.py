"""The retrieval channels: each returns candidates (id, cosine, channel signal), never full rows.

dense     pgvector, exact scan for small corpora and HNSW with iterative scan above a threshold
lexical   BM25 from per-scope statistics, or ts_rank when they are missing, stale or switched off
graph     personalized PageRank (networkx) around the entities the query names
neighbour the turns adjacent (same session) to an episode candidate
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import psycopg
import scipy.sparse

from echo_memory.libs.core.contracts.query import Channel, ItemKind
from echo_memory.libs.core.contracts.reindex import LEXICAL_FORMAT_VERSION
from echo_memory.libs.server.telemetry import db_span
from echo_memory.services.retrieval import queries as q
from echo_memory.services.retrieval.request import Search


@dataclass
class Candidate:
    id: str
    kind: ItemKind
    # Cosine to the query. The graph channel finds its edges without reading vectors;
    # `fill_cosines` sets theirs before fusion (NaN until then).
    cos: float
    lex: float = 0.0
    graph: float = 0.0
    # Lexical detail (BM25 mode only): distinct query terms the item matched, how many query
    # terms its corpus knows at all, and the idf-weighted count of query word pairs that occur
    # close together, in query order, in the item (see `proximity`).
    matched: int = 0
    terms: int = 0
    prox: float = 0.0
    # What BM25 gives an average-length item of this corpus that holds every query term the
    # corpus knows once (the sum of their idfs): how much lexical evidence the query could have.
    lex_ideal: float = 0.0
    channels: set[Channel] = field(default_factory=set)
    neighbours: set[str] = field(default_factory=set)
    # For a turn that asks a question: its reply, the first turn of its session after it that
    # another speaker said (set by `neighbours`, which adds that turn to the pool).
    reply: str | None = None


@dataclass
class LexicalMode:
    """How the lexical channel ranked a corpus, and why it fell back when it did."""

    mode: str  # bm25 | ts_rank
    reason: str | None = None


Pool = dict[str, Candidate]


def _add(pool: Pool, kind: ItemKind, channel: Channel, row: Sequence[Any]) -> Candidate:
    """The candidate of `row` (id, cosine or None), added to `pool` when new, found by `channel` too."""
    ident, cos = str(row[0]), (float(row[1]) if row[1] is not None else math.nan)
    cand = pool.get(ident)
    if cand is None:
        cand = pool[ident] = Candidate(id=ident, kind=kind, cos=cos)
    elif math.isnan(cand.cos):
        cand.cos = cos
    cand.channels.add(channel)
    return cand


# The corpora as q.CORPUS_SIZES names them.
CORPUS_NAMES = {ItemKind.FACT: "facts", ItemKind.EPISODE: "episodes"}


@dataclass(frozen=True)
class Corpus:
    """What the statistics say about one corpus of the scopes read."""

    kind: ItemKind
    docs: int = 0  # rows counted by the statistics
    format_version: int | None = None  # the oldest format among them
    scopes_with_stats: int = 0
    has_rows: bool = False  # whether the corpus holds any searchable row, statistics or not
    hot_pending: int = 0  # facts waiting for a run to enter the hot tier's indexes (counted up to a cap)
    has_digests: bool = False  # whether a run left current digests in the scopes read (facts only)

    @property
    def name(self) -> str:
        return CORPUS_NAMES[self.kind]


def corpus_sizes(rows: list[tuple[Any, ...]]) -> dict[ItemKind, Corpus]:
    """Both kinds -> their Corpus in the scopes read, from the rows of q.CORPUS_SIZES (empty when absent)."""
    found = {r[0]: r for r in rows}
    sizes: dict[ItemKind, Corpus] = {}
    for kind, name in CORPUS_NAMES.items():
        r = found.get(name)
        if r is None:
            sizes[kind] = Corpus(kind)
        else:
            sizes[kind] = Corpus(kind, int(r[1]), r[2], int(r[3]), bool(r[4]), int(r[5]), bool(r[6]))
    return sizes


def tiered(sql: str, search: Search, pending: int | None = None) -> str:
    """`sql`, a facts channel statement, limited to hot facts when the search asks for the hot tier;
    `pending`: how many facts wait for a run to enter the hot tier's indexes (None: not counted,
    so the facts table's rows are filtered)."""
    if not search.hot:
        return sql
    return q.HOT_FILTERED[sql] if pending is None else q.hot_statement(sql, pending)


async def via_digests(conn: psycopg.AsyncConnection, pool: Pool, search: Search) -> list[str]:
    """Member facts of the current topic digests nearest the query (through the digests' HNSW index) and
    of those that hold its rarest words, each with its cosine (channel `via_digest`): how a
    hot-tier search reaches consolidated and archived facts. Returns their ids (empty when the
    scopes have no digests). The words' route follows the lexical channel: none when it is
    switched off, none while the lexical statistics are missing."""
    binds = await search.vector_binds(digests=search.settings.digests_expanded,
                                      members=search.settings.members_per_digest)
    with db_span("via_digests", org=search.org):
        await conn.execute(q.DIGEST_INDEX_ON)
        try:
            rows = await (await conn.execute(q.DIGEST_MEMBERS, binds, prepare=False)).fetchall()
        finally:
            await conn.execute(q.DIGEST_INDEX_OFF)
    if Channel.LEXICAL in search.channels:
        with db_span("via_digests_by_words", org=search.org):
            # Not prepared: a generic plan cannot see the query's terms (as the lexical channel).
            rows += await (await conn.execute(q.DIGEST_MEMBERS_BY_WORDS, binds, prepare=False)).fetchall()
    for row in rows:
        _add(pool, ItemKind.FACT, Channel.VIA_DIGEST, row)
    return list(dict.fromkeys(str(row[0]) for row in rows))


async def lexical_of(conn: psycopg.AsyncConnection, pool: Pool, search: Search, corpus: Corpus,
                     ids: list[str]) -> None:
    """The lexical channel's scores for the facts `ids` alone (BM25 or ts_rank, as `lexical` would
    pick): members reached through digests then compete with hot facts on words as well as meaning.
    Facts that match no selected query term get nothing; `ids` empty reads nothing."""
    if not ids:
        return
    mode = lexical_mode(corpus, search.settings.lexical_bm25)
    sql = q.LEXICAL_MEMBERS_BM25 if mode.mode == "bm25" else q.LEXICAL_MEMBERS_TS_RANK
    binds = await search.vector_binds(ids=ids)
    binds["limit"] = len(ids)
    with db_span(f"lexical_members_{mode.mode}", org=search.org):
        rows = await (await conn.execute(sql, binds, prepare=False)).fetchall()
    _take_lexical(pool, ItemKind.FACT, rows)


async def dense(conn: psycopg.AsyncConnection, pool: Pool, search: Search, corpus: Corpus) -> None:
    """The `limit` nearest visible items of one corpus, exact or through HNSW (above the threshold).

    The HNSW path needs q.HNSW_SETTINGS run earlier in the same transaction (iterative scan:
    without it, a scope that is a small part of the index can come back with too few rows);
    query_memory sets them while the query is still being embedded, off the critical path.
    An `as_of` search always ranks exactly: what HNSW finds depends on the graph's current shape,
    which every later insert or row move (a tier move) changes, so a past instant's answer would too.
    """
    use_hnsw = corpus.docs > search.settings.hnsw_threshold and search.as_of is None
    if corpus.kind is ItemKind.FACT:
        sql = tiered(q.DENSE_FACTS_HNSW if use_hnsw else q.DENSE_FACTS_EXACT, search, corpus.hot_pending)
    else:
        sql = q.DENSE_EPISODES_HNSW if use_hnsw else q.DENSE_EPISODES_EXACT
    binds = await search.vector_binds()
    with db_span(f"dense_{corpus.name}_{'hnsw' if use_hnsw else 'exact'}", org=search.org):
        # Never a server-side prepared statement: after five runs Postgres may switch to a
        # generic plan, which cannot see LIMIT and the vector and sorts the whole scope instead
        # of walking the HNSW index (measured at 100k facts: 9 ms instead of 2-3 ms).
        rows = await (await conn.execute(sql, binds, prepare=False)).fetchall()
    for row in rows:
        _add(pool, corpus.kind, Channel.DENSE, row)


def lexical_mode(corpus: Corpus, bm25_enabled: bool) -> LexicalMode:
    """BM25 when the corpus' statistics are present and current; otherwise ts_rank, with why.

    An empty corpus counts as BM25 (there is nothing to rank either way).
    """
    if not bm25_enabled:
        return LexicalMode("ts_rank", "BM25 is switched off (ECHO_MEMORY_RETRIEVAL__LEXICAL_BM25=0)")
    if corpus.scopes_with_stats == 0:
        if corpus.has_rows:
            return LexicalMode("ts_rank", "no statistics: run `echo-memory reindex`")
        return LexicalMode("bm25")
    if corpus.format_version != LEXICAL_FORMAT_VERSION:
        return LexicalMode(
            "ts_rank",
            f"{corpus.name} statistics are format {corpus.format_version}, this code needs {LEXICAL_FORMAT_VERSION}: "
            "run `echo-memory reindex`",
        )
    return LexicalMode("bm25")


async def lexical(conn: psycopg.AsyncConnection, pool: Pool, search: Search, corpus: Corpus) -> None:
    """BM25 (or ts_rank, see `lexical_mode`) candidates of one corpus, with what fusion's boosts need."""
    mode = lexical_mode(corpus, search.settings.lexical_bm25)
    # Only a corpus larger than the candidate cap can match more rows than it scores.
    large = corpus.docs > q.LEXICAL_CANDIDATES
    if corpus.kind is ItemKind.FACT:
        bm25 = q.LEXICAL_FACTS_BM25_PAIRS if large else q.LEXICAL_FACTS_BM25
        sql = tiered(bm25 if mode.mode == "bm25" else q.LEXICAL_FACTS_TS_RANK, search, corpus.hot_pending)
    else:
        bm25 = q.LEXICAL_EPISODES_BM25_PAIRS if large else q.LEXICAL_EPISODES_BM25
        sql = bm25 if mode.mode == "bm25" else q.LEXICAL_EPISODES_TS_RANK
    binds = await search.vector_binds()
    with db_span(f"lexical_{corpus.name}_{mode.mode}", org=search.org):
        # Not prepared, for the reason `dense` gives: a generic plan cannot see the query's terms
        # (measured at 100k facts: 14 ms instead of 5).
        rows = await (await conn.execute(sql, binds, prepare=False)).fetchall()
    _take_lexical(pool, corpus.kind, rows)


def _take_lexical(pool: Pool, kind: ItemKind, rows: Sequence[Sequence[Any]]) -> None:
    """Lexical rows into `pool`, with the score and what the coordination and proximity boosts need."""
    # In BM25 mode the first row alone carries the query's positions and idfs (see `_bm25`).
    query_positions, idfs = (rows[0][6], rows[0][7] or {}) if rows else (None, {})
    ideal = sum(float(v) for v in idfs.values())
    for ident, lex, cos, matched, terms, doc_positions, _, _ in rows:
        if lex and float(lex) > 0:
            cand = _add(pool, kind, Channel.LEXICAL, (ident, cos))
            cand.lex = max(cand.lex, float(lex))
            cand.matched, cand.terms, cand.lex_ideal = int(matched), int(terms), ideal
            if doc_positions and query_positions and int(matched) >= 2:
                cand.prox = proximity(query_positions, doc_positions, idfs)


PROXIMITY_WINDOW = 3
PROXIMITY_SLACK = 2


def proximity(query: dict[str, list[int]], doc: dict[str, list[int]], idf: dict[str, float]) -> float:
    """Sum over adjacent query word pairs (a, b) that the item also has in that order, close by.

    Pairs come from the query's lexemes in position order ("charity race", "another operation
    ... progress"); a pair counts once, with the smaller idf of its two words, when b follows a
    in the item within max(PROXIMITY_WINDOW, the pair's distance in the query + PROXIMITY_SLACK)
    positions. 0.0 when no pair is close (or the item matched fewer than two terms).
    """
    order = sorted((pos, term) for term, positions in query.items() for pos in positions)
    total = 0.0
    seen: set[tuple[str, str]] = set()
    for (pa, a), (pb, b) in itertools.pairwise(order):
        if a == b or (a, b) in seen or a not in doc or b not in doc:
            continue
        reach = max(PROXIMITY_WINDOW, pb - pa + PROXIMITY_SLACK)
        if any(0 < y - x <= reach for x in doc[a] for y in doc[b]):
            seen.add((a, b))
            total += min(float(idf.get(a, 0.0)), float(idf.get(b, 0.0)))
    return total


_WORD = re.compile(r"[\w][\w.+#/-]*", re.UNICODE)


def query_grams(query: str, longest: int = 3) -> list[str]:
    """Every 1..`longest` word n-gram of the query, lower-cased (candidate entity names)."""
    words = [w.strip(".") for w in _WORD.findall(query.lower())]
    words = [w for w in words if w]
    grams = {" ".join(words[i : i + n]) for n in range(1, longest + 1) for i in range(len(words) - n + 1)}
    return sorted(grams)


async def named_entities(conn: psycopg.AsyncConnection, search: Search) -> list[str]:
    """Ids of the entities the query names (any 1–3 word n-gram, exact name or alias); may be empty."""
    with db_span("graph_seeds", org=search.org):
        rows = await (await conn.execute(q.ENTITIES_NAMED, search.binds(grams=query_grams(search.query)))).fetchall()
    return [r[0] for r in rows]


async def graph_neighbourhood(conn: psycopg.AsyncConnection, search: Search, named: list[str]) -> list[tuple[str, str, str]]:
    """(fact id, source, target) of the visible edges within two hops of the named entities, at most
    the settings' `graph_edge_cap` per hop.

    Needs no query vector, so it runs while the query is embedded. Empty when `named` is.
    """
    if not named:
        return []
    binds = search.binds(seeds=named, edge_cap=search.settings.graph_edge_cap)
    with db_span("graph_neighbourhood", org=search.org):
        rows = await (await conn.execute(tiered(q.GRAPH_NEIGHBOURHOOD, search), binds)).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def graph_scores(edges: list[tuple[str, str, str]], named: list[str], *, limit: int) -> list[tuple[float, str]]:
    """Personalized PageRank over the neighbourhood of the named entities: the `limit` best edges.

    Returns (signal, fact id) pairs, best first; [] when no named entity is in the neighbourhood.
    A fact's signal is the PageRank of its two endpoints, with restarts to the entities the query
    names. It needs no query vector, so it runs while the query is embedded. (The endpoints of
    the best dense facts were restart seeds too, which put PageRank after the dense channel, on
    the critical path: dropped after measuring no ranking gain from them on agent-facts, LoCoMo or
    the synthetic store's own questions at 100k facts, lab/NOTES.md.) The caller runs the
    channel only when the query names an entity: the dense hits alone only echo the dense
    ranking back (measured: no gain on agent-facts, +290 ms on a hub entity).
    """
    if not edges:
        return []
    g: nx.Graph[str] = nx.Graph()
    for _, source, target in edges:
        weight = g.get_edge_data(source, target, {"weight": 0})["weight"] + 1
        g.add_edge(source, target, weight=weight)
    seeds = {e for e in named if e in g}
    if not seeds:
        return []
    personalization = {node: 1.0 if node in seeds else 0.0 for node in g.nodes}
    rank = personalized_pagerank(g, personalization)
    return sorted(((rank[s] + rank[t], fid) for fid, s, t in edges), reverse=True)[:limit]


def graph(pool: Pool, scored: list[tuple[float, str]]) -> None:
    """Add the graph channel's facts to `pool` (their cosines are filled in by `fill_cosines`)."""
    for value, fid in scored:
        cand = _add(pool, ItemKind.FACT, Channel.GRAPH, (fid, None))
        cand.graph = max(cand.graph, float(value))


async def fill_cosines(conn: psycopg.AsyncConnection, pool: Pool, search: Search) -> None:
    """Set the cosine of every fact found without one (the graph's); drop any no longer visible."""
    ids = [c.id for c in pool.values() if math.isnan(c.cos)]
    if not ids:
        return
    binds = await search.vector_binds(ids=ids)
    with db_span("fact_cosines", org=search.org):
        rows = await (await conn.execute(q.FACT_COSINES, binds)).fetchall()
    found = {r[0]: float(r[1]) for r in rows}
    for ident in ids:
        if ident in found:
            pool[ident].cos = found[ident]
        else:
            del pool[ident]


def personalized_pagerank(
    g: nx.Graph[Any], personalization: dict[Any, float], alpha: float = 0.85, iterations: int = 200, tol: float = 1e-6
) -> dict[Any, float]:
    """PageRank with restarts to the seeds: networkx's power iteration, on a matrix built once.

    The same algorithm as `nx.pagerank` (row-normalised weights, dangling nodes restart to the
    seeds, stop when the L1 change is below nodes × tol; tests/unit/test_pagerank.py holds it to
    networkx's answer). networkx multiplies `x @ A`, which makes scipy build a transposed sparse
    matrix on every iteration: 4.9 ms for a 229-edge neighbourhood at 100k facts, on the event
    loop. Transposed once, the whole call (matrix built by networkx included) takes ~1.6 ms.

    With alpha 0.85 the error shrinks by 0.85 per iteration, so 200 iterations always reach the
    tolerance; 1e-6 leaves ~3e-4 of total mass on a 300-node neighbourhood, far below the gaps
    that order facts. Raises `nx.PowerIterationFailedConvergence` as networkx would.
    """
    nodes = list(g)
    if not nodes:
        return {}
    matrix = nx.to_scipy_sparse_array(g, nodelist=nodes, weight="weight", dtype=np.dtype(float))
    out_weight = np.asarray(matrix.sum(axis=1)).ravel()
    dangling = out_weight == 0
    scale = np.divide(1.0, out_weight, out=np.zeros_like(out_weight), where=~dangling)
    # Row-normalised, then transposed once: x @ A becomes A_T @ x, a plain CSR product.
    transposed = (scipy.sparse.diags_array(scale) @ matrix).T.tocsr()
    restart = np.array([personalization.get(node, 0.0) for node in nodes], dtype=float)
    if restart.sum() <= 0:
        raise ZeroDivisionError("personalization must give some node a positive weight")
    restart /= restart.sum()
    x = np.full(len(nodes), 1.0 / len(nodes))
    for _ in range(iterations):
        last = x
        x = alpha * (transposed @ last + last[dangling].sum() * restart) + (1 - alpha) * restart
        if np.abs(x - last).sum() < len(nodes) * tol:
            return dict(zip(nodes, map(float, x), strict=True))
    raise nx.PowerIterationFailedConvergence(iterations)


# How many turns after a question its reply is looked for when the asker's own messages follow
# it: chosen before measuring (a burst of a few messages), not tuned.
REPLY_REACH = 4


async def neighbours(conn: psycopg.AsyncConnection, pool: Pool, search: Search) -> None:
    """Link every episode candidate with the turns next to it in its session (adding those turns).

    A question turn's `reply` is the first turn after it that someone else said, within
    REPLY_REACH turns: people chat in bursts, so a question is often followed by more of its
    asker's own messages before the answer comes. A reply further away than the next turn is
    linked as a neighbour too (it is the next turn of the other side of the conversation).
    """
    hits = [c.id for c in pool.values() if c.kind == ItemKind.EPISODE]
    if not hits:
        return
    binds = await search.vector_binds(ids=hits, radius=1, question_pattern=q.QUESTION_PATTERN)
    with db_span("episode_neighbours", org=search.org):
        rows = await (await conn.execute(q.EPISODE_NEIGHBOURS, binds)).fetchall()
    in_burst: list[str] = []  # questions whose next turn their own speaker said
    for nb_id, hit_id, cos, step, hit_asks, nb_asks, other_speaker in rows:
        ident, hit = str(nb_id), str(hit_id)
        if ident not in pool:
            pool[ident] = Candidate(id=ident, kind=ItemKind.EPISODE, cos=float(cos))
        pool[ident].neighbours.add(hit)
        pool[hit].neighbours.add(ident)
        if step == 1 and hit_asks and other_speaker:
            pool[hit].reply = ident
        elif step == -1 and nb_asks and other_speaker:
            pool[ident].reply = hit
        elif step == 1 and hit_asks:
            in_burst.append(hit)
    if in_burst:
        await _replies_past_a_burst(conn, pool, search, in_burst)


async def _replies_past_a_burst(
    conn: psycopg.AsyncConnection, pool: Pool, search: Search, questions: list[str]
) -> None:
    """Link each question turn whose next turn its own speaker said to the first turn within
    REPLY_REACH that someone else said (added to the pool when missing)."""
    binds = await search.vector_binds(ids=questions, reach=REPLY_REACH)
    with db_span("episode_replies", org=search.org):
        rows = await (await conn.execute(q.EPISODE_REPLIES, binds)).fetchall()
    for hit_id, reply_id, cos in rows:
        hit, ident = str(hit_id), str(reply_id)
        if ident not in pool:
            pool[ident] = Candidate(id=ident, kind=ItemKind.EPISODE, cos=float(cos))
        pool[hit].reply = ident
        pool[hit].neighbours.add(ident)
        pool[ident].neighbours.add(hit)
