"""Run the harness over the bus: import, query, score. `call(service, verb, args)` is the bus.

The CLI passes its admin bus call; tests pass `EchoStack.admin_call`. Nothing here touches the
database directly, so what is measured is what a user of the system gets.
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from libs.eval import agent_facts, locomo
from libs.eval.metrics import bootstrap_ci, hit_at, percentile, recall_at, reciprocal_rank

Call = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
IMPORT_CHUNK = 500


def progress(label: str, done: int, total: int) -> None:
    """A one-line progress bar on stderr (a terminal sees it redrawn in place)."""
    width = 30
    filled = int(width * done / max(total, 1))
    sys.stderr.write(f"\r{label:<22} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


async def new_scope(call: Call, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    await call("writes", "scope_create", {"name": name, "description": "throw-away scope of an eval run"})
    return name


async def import_conversation(call: Call, scope: str, conv: locomo.Conversation, show: bool = False) -> dict[str, str]:
    """Import a conversation's turns through the batched import verb; episode id -> dia_id."""
    by_id: dict[str, str] = {}
    turns = conv.turns
    for start in range(0, len(turns), IMPORT_CHUNK):
        chunk = turns[start : start + IMPORT_CHUNK]
        episodes = [
            {"kind": "turn", "content": t.content, "speaker": t.speaker, "session_id": f"{conv.sample_id}:S{t.session}",
             "seq": t.seq, "occurred_at": t.occurred_at, "metadata": {"dia_id": t.dia_id}}
            for t in chunk
        ]
        result = await call("writes", "import_episodes", {"scope": scope, "episodes": episodes})
        by_id.update(zip(result["episode_ids"], (t.dia_id for t in chunk), strict=True))
        if show:
            progress(f"import {conv.sample_id}", min(start + IMPORT_CHUNK, len(turns)), len(turns))
    return by_id


async def write_agent_facts(call: Call, scope: str, data: agent_facts.AgentFacts, show: bool) -> dict[str, str]:
    """Store every dataset fact; returns stored fact id -> dataset id."""
    by_id: dict[str, str] = {}
    for index, (fact_id, text) in enumerate(data.facts, start=1):
        result = await call("writes", "write_episode", {**agent_facts.write_args(fact_id, text), "scope": scope})
        if not result.get("stored"):
            raise RuntimeError(f"agent-facts {fact_id} was not stored: {result}")
        by_id[result["edges_created"][0]["fact_id"]] = fact_id
        if show and (index % 50 == 0 or index == len(data.facts)):
            progress("write agent-facts", index, len(data.facts))
    return by_id


async def run_locomo(
    call: Call, path: str | Path, *, conversations: int | None = None, questions: int | None = None,
    k: int = 10, show: bool = False,
) -> dict[str, Any]:
    """recall@k, hit@k, MRR@k and session@k (share of evidence sessions reached) per category and overall."""
    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    skipped = 0
    for conv in locomo.load(path)[:conversations]:
        scope = await new_scope(call, "eval-locomo")
        by_id = await import_conversation(call, scope, conv, show)
        session_of = {t.dia_id: t.session for t in conv.turns}
        asked = conv.questions[:questions]
        skipped += conv.skipped
        for index, qa in enumerate(asked, start=1):
            asked_one = await ask_locomo(call, scope, qa, by_id, session_of, k)
            latencies.append(asked_one.latency_ms)
            rows.append({"category": locomo.CATEGORIES[qa.category], **asked_one.scores})
            if show and (index % 25 == 0 or index == len(asked)):
                progress(f"query {conv.sample_id}", index, len(asked))
    return {"dataset": "locomo", "k": k, "questions": len(rows), "skipped_unresolvable": skipped,
            "overall": summary(rows), "by_category": _by(rows, "category"), "latency_ms": _latency(latencies)}


@dataclass
class LocomoAnswer:
    """One LoCoMo question asked: its scores, how long the call took, and the items returned."""

    scores: dict[str, float]
    latency_ms: float
    items: list[dict[str, Any]]


async def ask_locomo(
    call: Call, scope: str, qa: locomo.Question, by_id: dict[str, str], session_of: dict[str, int], k: int
) -> LocomoAnswer:
    """Ask one question in `scope` (top k) and score the answer; ids `by_id` does not map rank as misses."""
    started = time.perf_counter()
    result = await call("retrieval", "query_memory", {"query": qa.question, "scope": scope, "top_k": k})
    latency = (time.perf_counter() - started) * 1000
    ranked = [by_id.get(item["id"], "?") for item in result["results"]]
    return LocomoAnswer(locomo_scores(ranked, set(qa.evidence), session_of, k), latency, result["results"])


def locomo_scores(ranked: list[str], gold: set[str], session_of: dict[str, int], k: int) -> dict[str, float]:
    """One question's recall@k, hit@k, MRR@k and session@k (share of its evidence sessions reached)."""
    gold_sessions = {session_of[e] for e in gold}
    top_sessions = {session_of[d] for d in ranked[:k] if d in session_of}
    return {
        "recall": recall_at(ranked, gold, k), "hit": hit_at(ranked, gold, k),
        "mrr": reciprocal_rank(ranked, gold, k),
        "session": len(gold_sessions & top_sessions) / len(gold_sessions),
    }


async def rank_agent_facts(call: Call, scope: str, text: str, by_id: dict[str, str]) -> list[str]:
    """The dataset ids of one query's ranking, agent_facts.RANKING_DEPTH deep ("?" for other facts)."""
    result = await call(
        "retrieval", "query_memory", {"query": text, "scope": scope, "top_k": agent_facts.RANKING_DEPTH}
    )
    return [by_id.get(item["id"], "?") for item in result["results"]]


async def run_agent_facts(
    call: Call, path: str | Path, *, show: bool = False, context: bool = False
) -> dict[str, Any]:
    """hit@1, hit@10, MRR (over the whole ranking, as the dataset defines it) and MRR@10, by query kind.

    With `context`, also tokens per top-10 recall against a dump of every fact as one notes file.
    """
    data = agent_facts.load(path)
    scope = await new_scope(call, "eval-agent-facts")
    by_id = await write_agent_facts(call, scope, data, show)
    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    tokens: list[int] = []
    same_top10 = 0
    for qid, text, relevant, kind in data.queries:
        # The recall an agent makes (top 10): latency and tokens. The metrics come from the
        # deeper ranking, which the dataset scores over all its facts (agent_facts.RANKING_DEPTH).
        started = time.perf_counter()
        result = await call("retrieval", "query_memory", {"query": text, "scope": scope, "top_k": 10})
        latencies.append((time.perf_counter() - started) * 1000)
        tokens.append(int(result["total_tokens"]))
        ranked = await rank_agent_facts(call, scope, text, by_id)
        same_top10 += ranked[:10] == [by_id.get(item["id"], "?") for item in result["results"]]
        rows.append({"kind": kind, "query": qid, **agent_facts.scores(ranked, relevant)})
    report: dict[str, Any] = {
        "dataset": "agent-facts", "queries": len(rows), "overall": summary(rows), "by_kind": _by(rows, "kind"),
        "latency_ms": _latency(latencies), "ranking_depth": agent_facts.RANKING_DEPTH,
        # How many queries' top_k=10 recall is exactly the first 10 of the deeper ranking.
        "top10_same_as_ranking": same_top10, "per_query": rows,
    }
    if context:
        from libs.embed import count_tokens

        dump = sum(count_tokens(text) for _, text in data.facts)
        report["context"] = {"tokens_per_recall_mean": statistics.fmean(tokens), "full_notes_dump_tokens": dump,
                             "ratio": statistics.fmean(tokens) / dump, "hit10": report["overall"]["hit10"]}
    return report


def summary(rows: list[dict[str, Any]], *, ci: bool = True) -> dict[str, Any]:
    """The mean of every float column of `rows` (4 decimals), its 95% bootstrap interval when `ci`, and n."""
    keys = [k for k in rows[0] if isinstance(rows[0][k], float)] if rows else []
    out: dict[str, Any] = {k: round(statistics.fmean(r[k] for r in rows), 4) for k in keys}
    for key in keys if ci else []:
        low, high = bootstrap_ci([r[key] for r in rows], samples=500)
        out[f"{key}_ci95"] = [round(low, 4), round(high, 4)]
    out["n"] = len(rows)
    return out


def _by(rows: list[dict[str, Any]], field: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row[field]].append(row)
    return {name: summary(group, ci=False) for name, group in sorted(groups.items())}


def _latency(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 50), 2), "p95": round(percentile(values, 95), 2), "n": len(values)}
