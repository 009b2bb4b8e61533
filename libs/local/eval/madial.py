"""MADial-Bench (English): recall of the memories a dialogue should bring back.

Files (JSON Lines despite the `.json` suffix, see the dataset's SOURCE.md):
`MADial-Bench-en-memory.json` — `{"<id>": {time, scene, emotion, event}}` per line;
`MADial-Bench-en-dialogue.json` — `{dialogue: [...], test-turn: [i, ...], relevant-id: [...]}`.

The task as we run it: every memory's `event` is imported as one `document` episode (occurred
at its date) into a throw-away scope through the batched `import_episodes` verb; each dialogue's
lines before its first test turn (the assistant turn that should use a memory) are the query;
gold = `relevant-id`. The memory pool is shared by both personas, as in the authors' runs.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from echo_memory.libs.local.eval.bm25 import BM25, lead
from echo_memory.libs.local.eval.metrics import (
    hit_at,
    percentile,
    recall_at,
    recall_tokens,
    reciprocal_rank,
    returned_tokens,
    summarise,
)

Call = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
MEMORY_FILE = "MADial-Bench-en-memory.json"
DIALOGUE_FILE = "MADial-Bench-en-dialogue.json"
QUERY_MODES = ("context", "last-user", "recent-first")
KS = (1, 5, 10, 20)


@dataclass
class Memory:
    id: str
    event: str
    occurred_at: int | None


@dataclass
class Dialogue:
    lines: list[str]  # "Speaker: text", in order, before the first test turn
    relevant: set[str]


def dataset_files(path: str | Path) -> tuple[Path, Path]:
    """The memory and dialogue files from a directory, or from either file's path.

    Raises FileNotFoundError naming the file that is missing and the folder looked in.
    """
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    memory, dialogue = folder / MEMORY_FILE, folder / DIALOGUE_FILE
    for needed in (memory, dialogue):
        if not needed.exists():
            raise FileNotFoundError(f"MADial-Bench file {needed.name} not found in {folder}")
    return memory, dialogue


def _line(raw: str) -> str:
    """'<Bart>: "Hi!"\\n' -> 'Bart: Hi!'."""
    speaker, _, text = raw.strip().partition(":")
    return f"{speaker.strip().strip('<>')}: {text.strip().strip(chr(34))}"


def load(path: str | Path) -> tuple[list[Memory], list[Dialogue]]:
    """Every memory and every dialogue (with its context before the first test turn)."""
    memory_file, dialogue_file = dataset_files(path)
    memories = []
    for raw in memory_file.read_text(encoding="utf-8").splitlines():
        if raw.strip():
            for ident, item in json.loads(raw).items():
                when = datetime.strptime(item["time"], "%Y-%m-%d").replace(tzinfo=UTC) if item.get("time") else None
                memories.append(Memory(str(ident), item["event"], int(when.timestamp()) if when else None))
    dialogues = []
    for raw in dialogue_file.read_text(encoding="utf-8").splitlines():
        if raw.strip():
            item = json.loads(raw)
            first = min(item["test-turn"])
            lines = [_line(x) for x in item["dialogue"][1:first] if x.strip() not in ("<BOD>", "<EOD>")]
            dialogues.append(Dialogue(lines, {str(r) for r in item["relevant-id"]}))
    return memories, dialogues


def query_text(dialogue: Dialogue, mode: str = "context") -> str:
    """The query for a dialogue. context: every line before the test turn, in order;
    last-user: the user's last line only; recent-first: every line, newest first (so the
    embedder's 256-token window keeps the most recent lines)."""
    if mode == "context":
        return "\n".join(dialogue.lines)
    if mode == "recent-first":
        return "\n".join(reversed(dialogue.lines))
    if mode == "last-user":
        users = [line for line in dialogue.lines if not line.startswith("Assistant:")]
        return (users or dialogue.lines)[-1]
    raise ValueError(f"query mode must be one of {', '.join(QUERY_MODES)}")


def ndcg_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """Binary nDCG@k (the measure the dataset's SOURCE.md reports for the authors' baselines)."""
    dcg = sum(1 / math.log2(i + 2) for i, ident in enumerate(ranked[:k]) if ident in gold)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / ideal if ideal else 0.0


async def run_madial(
    call: Call, path: str | Path, *, dialogues: int | None = None, mode: str = "context", scope: str | None = None,
) -> dict[str, Any]:
    """recall@1/5/10/20, hit@5/10, MRR@20 and nDCG@5/10 with 95% bootstrap intervals, latency, and
    `tokens@10`: what the top-10 recall puts in an agent's context, for the system and for BM25."""
    from echo_memory.libs.local.eval.runner import new_scope
    from echo_memory.libs.server.embed import count_tokens

    if mode not in QUERY_MODES:
        raise ValueError(f"query mode must be one of {', '.join(QUERY_MODES)}")
    memories, items = load(path)
    scope = scope or await new_scope(call, "eval-madial")
    episodes = [{"kind": "document", "content": m.event, "occurred_at": m.occurred_at,
                 "metadata": {"madial_memory_id": m.id}} for m in memories]
    imported = await call("writes", "import_episodes", {"scope": scope, "episodes": episodes})
    memory_of = dict(zip(imported["episode_ids"], (m.id for m in memories), strict=True))
    rows: list[dict[str, float]] = []
    baseline: list[dict[str, float]] = []
    latencies: list[float] = []
    index = BM25({m.id: m.event for m in memories})  # the same texts the system was given
    tokens_of = {m.id: count_tokens(m.event) for m in memories}  # as the server counts a document
    for dialogue in items[:dialogues]:
        query = query_text(dialogue, mode)[:4000]
        started = time.perf_counter()
        result = await call("retrieval", "query_memory", {"query": query, "scope": scope, "top_k": max(KS)})
        latencies.append((time.perf_counter() - started) * 1000)
        rows.append(_scores([memory_of.get(item["id"], "?") for item in result["results"]], dialogue.relevant)
                    | {"tokens@10": returned_tokens(result["results"])})
        ranked = index.rank(query, max(KS))
        baseline.append(_scores(ranked, dialogue.relevant) | {"tokens@10": recall_tokens([tokens_of[m] for m in ranked])})
    leads = {key: lead([r[key] for r in rows], [r[key] for r in baseline]) for key in ("recall@10", "mrr@20")}
    return {"dataset": "madial-bench-en", "memories": len(memories), "dialogues": len(rows), "query_mode": mode,
            "overall": summarise(rows), "bm25": {"overall": summarise(baseline)}, "lead_over_bm25": leads,
            "latency_ms": {"p50": round(percentile(latencies, 50), 2), "p95": round(percentile(latencies, 95), 2)},
            "per_question": [{"system": mine, "bm25": theirs} for mine, theirs in zip(rows, baseline, strict=True)]}


def _scores(ranked: Sequence[str], gold: set[str]) -> dict[str, float]:
    row = {f"recall@{k}": recall_at(ranked, gold, k) for k in KS}
    return row | {"hit@5": hit_at(ranked, gold, 5), "hit@10": hit_at(ranked, gold, 10),
                  "mrr@20": reciprocal_rank(ranked, gold, 20), "ndcg@5": ndcg_at(ranked, gold, 5),
                  "ndcg@10": ndcg_at(ranked, gold, 10)}

