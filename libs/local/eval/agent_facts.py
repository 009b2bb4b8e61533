"""agent-facts: 200 one-line facts and 100 queries with relevant fact ids and a `kind`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from echo_memory.libs.local.eval.metrics import hit_at, reciprocal_rank

# The dataset scores MRR over the full ranking of its 200 facts. query_memory returns at most 100
# results, so the harness ranks with top_k 100: a relevant fact below rank 100 counts 0 instead of
# 1/rank (at most 1/101 less per such query, a lower bound that never flatters).
RANKING_DEPTH = 100


@dataclass
class AgentFacts:
    facts: list[tuple[str, str]]  # (id, text)
    queries: list[tuple[str, str, set[str], str]]  # (id, text, relevant ids, kind)


def load(path: str | Path) -> AgentFacts:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return AgentFacts(
        facts=[(f["id"], f["text"]) for f in data["facts"]],
        queries=[(q["id"], q["text"], set(q["relevant"]), q["kind"]) for q in data["queries"]],
    )


def write_args(fact_id: str, text: str) -> dict[str, object]:
    """A write_episode call storing one dataset fact as an edge notes → <fact id>.

    The dataset has no entities; a per-fact target keeps every fact its own active edge.
    """
    return {
        "session_id": "agent-facts",
        "project": "agent-facts",
        "entities": [{"name": "project notes", "type": "topic"}, {"name": fact_id, "type": "note"}],
        # Ids like f001/f002 are near-identical names to the embedder; they are different notes.
        "entity_resolutions": [{"mention": fact_id, "entity_id": "new", "rationale": "one note per dataset fact"}],
        "facts": [{"source": "project notes", "target": fact_id, "relation": "notes", "fact": text,
                   "confidence": "extracted"}],
    }


def scores(ranked: list[str], relevant: set[str]) -> dict[str, float]:
    """One query's hit@1, hit@10, MRR (over the whole ranking given) and MRR@10."""
    return {"hit1": hit_at(ranked, relevant, 1), "hit10": hit_at(ranked, relevant, 10),
            "mrr": reciprocal_rank(ranked, relevant), "mrr10": reciprocal_rank(ranked, relevant, 10)}
