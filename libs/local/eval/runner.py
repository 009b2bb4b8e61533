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

from echo_memory.libs.local.eval import agent_facts, locomo, longmemeval
from echo_memory.libs.local.eval.bm25 import BM25, lead
from echo_memory.libs.local.eval.metrics import (
    RECALL_DEPTH,
    hit_at,
    percentile,
    recall_at,
    recall_tokens,
    reciprocal_rank,
    returned_tokens,
    summarise,
)

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
    """recall@k, hit@k, MRR@k and session@k (share of evidence sessions reached) per category and overall,
    and `tokens`: what the top-10 recall puts in an agent's context, for the system and for BM25."""
    from echo_memory.libs.server.embed import count_tokens

    rows: list[dict[str, Any]] = []
    baseline: list[dict[str, Any]] = []
    asked_texts: list[dict[str, Any]] = []
    latencies: list[float] = []
    skipped = 0
    for conv in locomo.load(path)[:conversations]:
        scope = await new_scope(call, "eval-locomo")
        by_id = await import_conversation(call, scope, conv, show)
        session_of = {t.dia_id: t.session for t in conv.turns}
        index_bm25 = BM25({t.dia_id: t.content for t in conv.turns})  # the same texts the system was given
        tokens_of = {t.dia_id: count_tokens(t.content) for t in conv.turns}  # as the server counts a turn
        asked = conv.questions[:questions]
        skipped += conv.skipped
        for index, qa in enumerate(asked, start=1):
            asked_one = await ask_locomo(call, scope, qa, by_id, session_of, k)
            latencies.append(asked_one.latency_ms)
            category = locomo.CATEGORIES[qa.category]
            rows.append({"category": category, **asked_one.scores,
                         "tokens": returned_tokens(asked_one.items)})
            asked_texts.append(judged_row(qa.question, qa.answer, category, asked_one.items))
            ranked = index_bm25.rank(qa.question, k)
            baseline.append({"category": category, **locomo_scores(ranked, set(qa.evidence), session_of, k),
                             "tokens": recall_tokens([tokens_of[d] for d in ranked])})
            if show and (index % 25 == 0 or index == len(asked)):
                progress(f"query {conv.sample_id}", index, len(asked))
    leads = {key: lead([r[key] for r in rows], [r[key] for r in baseline]) for key in ("recall", "mrr")}
    return {"dataset": "locomo", "k": k, "questions": len(rows), "skipped_unresolvable": skipped,
            "overall": summary(rows), "by_category": _by(rows, "category"), "latency_ms": _latency(latencies),
            "bm25": {"overall": summary(baseline), "by_category": _by(baseline, "category")},
            "lead_over_bm25": leads,
            "per_question": [{"system": mine, "bm25": theirs, **asked} for mine, theirs, asked
                             in zip(rows, baseline, asked_texts, strict=True)]}


def judged_row(question: str, answer: str, kind: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    """What `judge-external` needs of one asked question: its text, the reference answer, its kind and
    the texts the top-10 recall returned (the memory an agent would have answered from)."""
    return {"question": question, "answer": answer, "kind": kind,
            "retrieved": [str(item.get("text", "")) for item in items[:RECALL_DEPTH]]}


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


# Turns asked for per LongMemEval question: a haystack holds ~50 sessions of ~10 turns, and ten
# distinct sessions must be reachable for session recall@10 to mean anything.
LONGMEMEVAL_DEPTH = 100
LONGMEMEVAL_KS = (5, 10)


async def run_longmemeval(
    call: Call, questions: list[longmemeval.Question], *, show: bool = False
) -> dict[str, Any]:
    """Session recall@5/@10, all@5/@10 and MRR per question type and overall, with 95% bootstrap intervals,
    and `tokens@10`: what the first ten turns of the ranking put in an agent's context.

    Each question's haystack is imported into a scope of its own and the question asked there.
    Questions with no evidence to find (abstention questions, or no answer sessions) are skipped
    and counted; a question whose haystack has no turns scores 0.
    """
    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    skipped = truncated = 0
    for index, question in enumerate(questions, start=1):
        if not question.has_evidence:
            skipped += 1
            continue
        scope = await new_scope(call, "eval-longmemeval")
        session_of, cut = await import_haystack(call, scope, question)
        truncated += cut
        started = time.perf_counter()
        result = await call("retrieval", "query_memory",
                            {"query": question.question[:4000], "scope": scope, "top_k": LONGMEMEVAL_DEPTH})
        latencies.append((time.perf_counter() - started) * 1000)
        ranked = [session_of.get(item["id"], "?") for item in result["results"]]
        rows.append({"type": question.question_type, "question_id": question.question_id,
                     **longmemeval_scores(ranked, set(question.answer_session_ids)),
                     "tokens@10": returned_tokens(result["results"]),
                     **judged_row(question.question[:4000], question.answer, question.question_type,
                                  result["results"])})
        if show:
            progress("longmemeval", index, len(questions))
    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_type[row["type"]].append(row)
    return {"dataset": "longmemeval", "questions": len(rows), "skipped_no_evidence": skipped,
            "truncated_turns": truncated, "ranking_depth_turns": LONGMEMEVAL_DEPTH,
            "overall": summary(rows), "by_type": {name: summary(group) for name, group in sorted(by_type.items())},
            "latency_ms": _latency(latencies), "per_question": rows}


async def import_haystack(call: Call, scope: str, question: longmemeval.Question) -> tuple[dict[str, str], int]:
    """Import a question's sessions as turns; (episode id -> session id, turns cut to the import limit).

    Turns with blank content are left out (an episode needs text).
    """
    turns = [(session, seq, turn) for session in question.sessions for seq, turn in enumerate(session.turns)
             if turn.content.strip()]
    session_of: dict[str, str] = {}
    cut = sum(len(f"{t.role}: {t.content}") > longmemeval.MAX_TURN_CHARS for _, _, t in turns)
    for start in range(0, len(turns), IMPORT_CHUNK):
        chunk = turns[start : start + IMPORT_CHUNK]
        episodes = [
            {"kind": "turn", "content": f"{t.role}: {t.content}"[: longmemeval.MAX_TURN_CHARS], "speaker": t.role,
             "session_id": s.id, "seq": seq, "occurred_at": s.occurred_at, "metadata": {"session_id": s.id}}
            for s, seq, t in chunk
        ]
        result = await call("writes", "import_episodes", {"scope": scope, "episodes": episodes})
        session_of.update(zip(result["episode_ids"], (s.id for s, _, _ in chunk), strict=True))
    return session_of, cut


def longmemeval_scores(ranked_turns: list[str], gold: set[str]) -> dict[str, float]:
    """Scores of one question, with LongMemEval's chat sessions ranked by their best-ranked turn.

    A dataset session's rank is that of its best turn; recall@k is the share of answer sessions among the
    first k sessions, all@k is 1 when every answer session is among them, MRR is 1/rank of the
    first answer session (0 when none is reached).
    """
    sessions = [s for s in dict.fromkeys(ranked_turns) if s != "?"]
    out = {f"recall@{k}": recall_at(sessions, gold, k) for k in LONGMEMEVAL_KS}
    out |= {f"all@{k}": float(gold <= set(sessions[:k])) for k in LONGMEMEVAL_KS}
    out["mrr"] = reciprocal_rank(sessions, gold)
    return out


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
    return await measure_agent_facts(call, agent_facts.load(path), show=show, context=context)


async def measure_agent_facts(
    call: Call, data: agent_facts.AgentFacts, *, show: bool = False, context: bool = False
) -> dict[str, Any]:
    """`run_agent_facts` on facts and queries already loaded, in a new scope of their own."""
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
        from echo_memory.libs.server.embed import count_tokens

        dump = sum(count_tokens(text) for _, text in data.facts)
        report["context"] = {"tokens_per_recall_mean": statistics.fmean(tokens), "full_notes_dump_tokens": dump,
                             "ratio": statistics.fmean(tokens) / dump, "hit10": report["overall"]["hit10"]}
    return report


async def run_context_sweep(
    call: Call, path: str | Path, sizes: list[int], *, show: bool = False
) -> dict[str, Any]:
    """Tokens per top-10 recall against a full dump as the store grows: one row per size.

    Each size stores the dataset's first N facts in a scope of its own and asks the queries whose
    relevant facts are all among them; sizes above the dataset's are cut to it (and said so).
    A size left with no query reports its tokens as null instead of a made-up figure.
    """
    data = agent_facts.load(path)
    rows: list[dict[str, Any]] = []
    for size in sorted(set(sizes)):
        facts = data.facts[:size]
        kept = {fact_id for fact_id, _ in facts}
        queries = [q for q in data.queries if q[2] <= kept]
        row: dict[str, Any] = {"size": size, "facts": len(facts), "queries": len(queries)}
        if queries:
            report = await measure_agent_facts(call, agent_facts.AgentFacts(facts, queries), show=show, context=True)
            ctx = report["context"]
            row |= {"tokens_per_recall_mean": round(ctx["tokens_per_recall_mean"], 1),
                    "full_notes_dump_tokens": ctx["full_notes_dump_tokens"],
                    "saving": round(1 - ctx["ratio"], 4), "hit10": report["overall"]["hit10"]}
        else:
            row |= {"tokens_per_recall_mean": None, "full_notes_dump_tokens": None, "saving": None, "hit10": None}
        rows.append(row)
        if len(facts) < size:
            break  # every larger size would be the whole dataset again
    return {"dataset": "agent-facts", "sweep": rows}


def summary(rows: list[dict[str, Any]], *, ci: bool = True) -> dict[str, Any]:
    """The mean of every float column of `rows` (4 decimals), its 95% bootstrap interval when `ci`, and n."""
    return summarise(rows, ci=ci, samples=500)


def _by(rows: list[dict[str, Any]], field: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row[field]].append(row)
    return {name: summary(group, ci=False) for name, group in sorted(groups.items())}


def _latency(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 50), 2), "p95": round(percentile(values, 95), 2), "n": len(values)}
