"""`python -m lab fusion-grid LOCOMO SPEC`: LoCoMo under many fusion weightings at once.

Running 1,982 LoCoMo questions through the services once per weighting would take hours, but
fusion is a pure function of the candidate pool (services/retrieval/fusion.py). So every
conversation is imported once through the real import verb on a throw-away system, each
question's pool is gathered by the retrieval service's own channel code (the step of
`query_memory` before fusion), and `fuse` is re-run for every weighting of the grid. The
weighting the service runs is always in the grid, and its figures are the ones `run_locomo`
reports for the same questions (lab/tests/test_lab_fusion_grid.py holds it to that).

SPEC names FusionWeights fields and the values to try, e.g. "neighbour=0.15,0.225 reply=0.4,0.6"
(groups separated by spaces or ";"); fields not named keep the service's values.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector_async

from echo_memory.libs.core.config.retrieval import FusionWeights, RetrievalSettings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.query import QueryMemoryInput
from echo_memory.libs.local.eval import locomo
from echo_memory.libs.local.eval.runner import import_conversation, locomo_scores, new_scope
from echo_memory.libs.local.eval.system import stack_call, throwaway_stack
from echo_memory.libs.server.embed import MiniLM, settle
from echo_memory.libs.server.store.access import resolve_read_scopes
from echo_memory.libs.testing import EchoStack
from echo_memory.services.retrieval import search
from echo_memory.services.retrieval.channels import Pool
from echo_memory.services.retrieval.fusion import fuse
from echo_memory.services.retrieval.request import Search

K = 10


@dataclass
class Captured:
    """One question's candidate pool before fusion, and what scoring it needs."""

    pool: Pool
    by_id: dict[str, str]  # episode id -> dia_id
    gold: set[str]
    session_of: dict[str, int]
    scope: str
    question: str


def parse_grid(spec: str, base: FusionWeights) -> list[FusionWeights]:
    """Every combination of the values SPEC names, `base` for the rest; `base` itself comes first.

    Raises ValueError naming the problem: an unknown field, a value that is not a number, or a
    group without "=".
    """
    axes: dict[str, list[float]] = {}
    for group in spec.replace(";", " ").split():
        name, sep, values = group.partition("=")
        if not sep or not values:
            raise ValueError(f"fusion grid: '{group}' is not name=value[,value...]")
        if name not in FusionWeights.model_fields:
            raise ValueError(f"fusion grid: unknown weight '{name}' (known: {', '.join(FusionWeights.model_fields)})")
        try:
            axes[name] = [float(v) for v in values.split(",")]
        except ValueError:
            raise ValueError(f"fusion grid: '{values}' of {name} is not a list of numbers") from None
    grid = [base]
    for combo in itertools.product(*axes.values()):
        weights = base.model_copy(update=dict(zip(axes, combo, strict=True)))
        if weights != base:
            grid.append(weights)
    return grid


async def candidate_pool(
    conn: psycopg.AsyncConnection, caller: Caller, args: QueryMemoryInput, embedder: MiniLM,
    settings: RetrievalSettings,
) -> Pool:
    """The candidate pool `query_memory` would fuse for `args` (a search: a query, no `about`).

    The same steps as the service: scopes resolved for `caller`, the query embedded, every
    switched-on channel run on `conn`. Empty when nothing in the scopes matches; raises what
    query_memory raises for a scope the caller may not read or that does not exist.
    """
    query = (args.query or "").strip()
    embedding_job = asyncio.create_task(asyncio.to_thread(embedder.embed_one, query))
    try:
        scopes = await resolve_read_scopes(conn, caller, args.scope)
        wanted = Search(caller=caller, scopes=tuple(scopes), query=query, as_of=None, at=datetime.now(tz=UTC),
                        tier=args.tier, top_k=args.top_k, include_episodes=args.include_episodes,
                        settings=settings, model=embedder.name, vector=embedding_job)
        pool, _, _ = await search._candidates(conn, wanted, None)
    finally:
        await settle(embedding_job)
    return pool


async def capture(
    stack: EchoStack, path: str | Path, *, conversations: int | None = None, questions: int | None = None,
    settings: RetrievalSettings | None = None,
) -> list[Captured]:
    """Import each conversation into a throw-away scope (over the bus) and keep every question's pool."""
    return await capture_conversations(stack, locomo.load(path)[:conversations], questions=questions,
                                       settings=settings)


async def capture_conversations(
    stack: EchoStack, convs: list[locomo.Conversation], *, questions: int | None = None,
    settings: RetrievalSettings | None = None, turn_of: dict[str, str] | None = None,
) -> list[Captured]:
    """`capture` for conversations already loaded; `turn_of` maps an imported turn's dia_id to the
    one its questions' evidence names (a fragment to its whole turn), identity when None."""
    settings = settings or RetrievalSettings()
    call = stack_call(stack, timeout=600)
    caller = Caller(org=stack.org, agent_id="fusion-grid", read_scopes=["*"], write_scopes=[])
    captured: list[Captured] = []
    async with await psycopg.AsyncConnection.connect(stack.database_url) as conn:
        await register_vector_async(conn)
        for conv in convs:
            scope = await new_scope(call, "fusion-grid")
            whole = turn_of or {t.dia_id: t.dia_id for t in conv.turns}
            imported = await import_conversation(call, scope, conv)
            by_id = {episode: whole[dia] for episode, dia in imported.items()}
            session_of = {whole[t.dia_id]: t.session for t in conv.turns}
            for qa in conv.questions[:questions]:
                args = QueryMemoryInput(query=qa.question, scope=scope, top_k=K)
                async with conn.transaction():  # the HNSW settings are local to a transaction
                    pool = await candidate_pool(conn, caller, args, stack.embedder, settings)
                captured.append(Captured(pool, by_id, set(qa.evidence), session_of, scope, qa.question))
    return captured


def score(captured: list[Captured], weights: FusionWeights, channels: tuple[str, ...]) -> dict[str, float]:
    """recall@10, hit@10, MRR@10 and session@10 over the captured questions, as run_locomo counts them."""
    rows = [
        locomo_scores([item.by_id.get(c.id, "?") for c, _ in fuse(item.pool, weights, channels)[:K]],
                      item.gold, item.session_of, K)
        for item in captured
    ]
    return means(rows)


def means(rows: list[dict[str, float]]) -> dict[str, float]:
    """The mean of LoCoMo's four figures over `rows` (4 decimals; 0.0 for no rows)."""
    names = ("recall", "hit", "mrr", "session")
    return {name: round(statistics.fmean(row[name] for row in rows), 4) if rows else 0.0 for name in names}


def run_grid(
    captured: list[Captured], grid: list[FusionWeights], channels: tuple[str, ...]
) -> list[dict[str, Any]]:
    """One row per weighting: the weights that differ from the first (the service's), and the figures.

    Rows come best MRR first; the service's own row says `"service": true`.
    """
    base = grid[0].model_dump()
    rows = []
    for index, weights in enumerate(grid):
        changed = {k: v for k, v in weights.model_dump().items() if v != base[k]}
        rows.append({"service": index == 0, "weights": changed, **score(captured, weights, channels)})
    return sorted(rows, key=lambda row: (-row["mrr"], -row["recall"]))


async def run(
    path: str | Path, grid: list[FusionWeights], settings: RetrievalSettings, *,
    conversations: int | None = None, questions: int | None = None,
) -> dict[str, Any]:
    """The whole command on a throw-away system: {"questions", "configurations", "rows"}.

    `grid` comes from `parse_grid(spec, settings.fusion)`, so its first row is the service's.
    """
    async with throwaway_stack() as stack:
        captured = await capture(stack, path, conversations=conversations, questions=questions, settings=settings)
    rows = run_grid(captured, grid, settings.channels)
    return {"dataset": "locomo", "k": K, "questions": len(captured), "configurations": len(grid), "rows": rows}
