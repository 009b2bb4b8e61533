"""MemDaily (MemSim, Chinese): find the messages a question about a user's day needs.

Files: `messages_and_QAs/NN_<type>_<topic>.json`, each a list of trajectories
`{tid, message_list: [{mid, message, time, place}], question_list: [{qid, question, answer,
target_step_id: [mid, ...], ...}]}`. Questions whose text or answer is `[ERRORQ]`/`[ERRORA]` are
dropped, as the authors' own post-processing does.

The task as we run it (the authors' "vanilla" setting): each trajectory's messages are imported as
episodes into a throw-away scope of their own through `import_episodes`; its question is asked there
with `query_memory`; gold = `target_step_id`. A plain BM25 over the same messages, with CJK
character bigrams, is scored in the same run (`libs/local/eval/bm25.py`).
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from echo_memory.libs.local.eval.bm25 import BM25, lead
from echo_memory.libs.local.eval.metrics import (
    hit_at,
    latency_stats,
    recall_at,
    recall_tokens,
    reciprocal_rank,
    returned_tokens,
    summarise,
)

Call = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
FOLDER = "messages_and_QAs"
# The file name's type, as the paper's tables name them.
TYPES = {"01": "simple", "02": "conditional", "03": "comparative", "04": "aggregative", "05": "post_processing",
         "06": "noisy"}
_FILE = re.compile(r"^(\d\d)_[a-z_]+\.json$")
_TIME = re.compile(r"(\d{4})年(\d{2})月(\d{2})日\D*(\d{2}):(\d{2})")
CHINA = timezone(timedelta(hours=8))
KS = (1, 5, 10)


@dataclass
class Message:
    mid: str
    text: str
    occurred_at: int | None


@dataclass
class Trajectory:
    source: str  # file name without .json
    kind: str  # one of TYPES' values
    tid: int
    messages: list[Message]
    questions: list[tuple[str, set[str]]]  # (question, gold mids)


def dataset_folder(path: str | Path) -> Path:
    """The folder holding the per-type JSON files: PATH itself or PATH/messages_and_QAs.

    Raises FileNotFoundError naming where it looked when neither holds any.
    """
    path = Path(path)
    for folder in (path / FOLDER, path):
        if folder.is_dir() and any(_FILE.match(p.name) for p in folder.iterdir()):
            return folder
    raise FileNotFoundError(f"no MemDaily files (NN_type_topic.json) in {path} or {path / FOLDER}")


def _when(text: str | None) -> int | None:
    match = _TIME.search(text or "")
    if not match:
        return None
    year, month, day, hour, minute = (int(g) for g in match.groups())
    return int(datetime(year, month, day, hour, minute, tzinfo=CHINA).timestamp())


def load(path: str | Path, *, per_file: int | None = None) -> list[Trajectory]:
    """Every trajectory (the first `per_file` of each file) with its usable questions."""
    out: list[Trajectory] = []
    for file in sorted(dataset_folder(path).iterdir()):
        match = _FILE.match(file.name)
        if not match:
            continue
        for item in json.loads(file.read_text(encoding="utf-8"))[:per_file]:
            messages = [Message(str(m["mid"]), m["message"], _when(m.get("time"))) for m in item["message_list"]]
            known = {m.mid for m in messages}
            questions = [
                (q["question"], {str(s) for s in q["target_step_id"]} & known) for q in item["question_list"]
                if q["question"] != "[ERRORQ]" and q["answer"] != "[ERRORA]"
            ]
            questions = [(text, gold) for text, gold in questions if gold]
            if questions:
                out.append(Trajectory(file.stem, TYPES.get(match.group(1), match.group(1)), int(item["tid"]),
                                      messages, questions))
    return out


def scores(ranked: list[str], gold: set[str]) -> dict[str, float]:
    """One question's recall@1/5/10, hit@5 and MRR@10 over message ids."""
    row = {f"recall@{k}": recall_at(ranked, gold, k) for k in KS}
    return row | {"hit@5": hit_at(ranked, gold, 5), "mrr@10": reciprocal_rank(ranked, gold, 10)}


async def run_memdaily(call: Call, path: str | Path, *, per_file: int | None = None) -> dict[str, Any]:
    """Scores per type and overall for the system and for BM25, the system's lead, latency, and
    `tokens@10`: what the top-10 recall puts in an agent's context, for the system and for BM25."""
    from echo_memory.libs.local.eval.runner import new_scope
    from echo_memory.libs.server.embed import count_tokens

    system: list[dict[str, float]] = []
    baseline: list[dict[str, float]] = []
    kinds: list[str] = []
    latencies: list[float] = []
    trajectories = load(path, per_file=per_file)
    for trajectory in trajectories:
        scope = await new_scope(call, "eval-memdaily")
        episodes = [{"kind": "turn", "content": m.text, "speaker": "user", "session_id": f"{trajectory.source}:{trajectory.tid}",
                     "seq": index, "occurred_at": m.occurred_at, "metadata": {"memdaily_mid": m.mid}}
                    for index, m in enumerate(trajectory.messages)]
        imported = await call("writes", "import_episodes", {"scope": scope, "episodes": episodes})
        mid_of = dict(zip(imported["episode_ids"], (m.mid for m in trajectory.messages), strict=True))
        index = BM25({m.mid: m.text for m in trajectory.messages})
        tokens_of = {m.mid: count_tokens(m.text) for m in trajectory.messages}  # as the server counts a turn
        for question, gold in trajectory.questions:
            started = time.perf_counter()
            result = await call("retrieval", "query_memory", {"query": question, "scope": scope, "top_k": max(KS)})
            latencies.append((time.perf_counter() - started) * 1000)
            system.append(scores([mid_of.get(r["id"], "?") for r in result["results"]], gold)
                          | {"tokens@10": returned_tokens(result["results"])})
            ranked = index.rank(question, max(KS))
            baseline.append(scores(ranked, gold) | {"tokens@10": recall_tokens([tokens_of[m] for m in ranked])})
            kinds.append(trajectory.kind)
    by_kind: dict[str, dict[str, Any]] = {}
    grouped: dict[str, list[int]] = defaultdict(list)
    for position, kind in enumerate(kinds):
        grouped[kind].append(position)
    for kind, positions in grouped.items():
        by_kind[kind] = {"system": summarise([system[i] for i in positions]),
                         "bm25": summarise([baseline[i] for i in positions])}
    return {
        "dataset": "memdaily", "trajectories": len(trajectories), "questions": len(system),
        "overall": {"system": summarise(system), "bm25": summarise(baseline),
                    "lead_recall@5": lead([r["recall@5"] for r in system], [r["recall@5"] for r in baseline]),
                    "lead_mrr@10": lead([r["mrr@10"] for r in system], [r["mrr@10"] for r in baseline])},
        "by_type": by_kind, "latency_ms": latency_stats(latencies),
        "per_question": [{"type": kind, "system": mine, "bm25": theirs}
                         for kind, mine, theirs in zip(kinds, system, baseline, strict=True)],
    }
