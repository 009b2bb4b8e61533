"""`echo-memory eval` (run_agent_facts) over the real bus, on a hand-made set.

The dataset scores MRR over the whole ranking of its facts; the harness ranks 100 deep for the
metrics and reports MRR@10 beside it. Here one query's answer is unrelated to it and must rank
below twelve facts about the query, so the two MRRs differ in a known way. Retrieval runs with the
quality gates off: they would leave that unrelated answer out (tests/retrieval/test_quality_gates.py)
rather than rank it 13th, and this test checks the harness's arithmetic, not the gates.
"""

from __future__ import annotations

import json
from pathlib import Path

from echo_memory.libs.core.config.retrieval import QualityGates, RetrievalSettings
from echo_memory.libs.local.eval.runner import run_agent_facts
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing import EchoStack

UNGATED = RetrievalSettings(gates=QualityGates.off())

BACKUPS = [f"Database backups of cluster {name} run nightly and are kept for {days} days."
           for name, days in zip("ABCDEFGHIJKL", range(3, 15), strict=True)]


def _dataset(tmp_path: Path) -> Path:
    facts = [{"id": f"f{i:02d}", "text": text} for i, text in enumerate(BACKUPS, start=1)]
    facts.append({"id": "cat", "text": "The office cat is named Miso."})
    queries = [
        # The answer is the one fact unrelated to the question: it ranks 13th of 13.
        {"id": "deep", "text": "how long are database backups kept", "relevant": ["cat"], "kind": "paraphrase"},
        {"id": "top", "text": "what is the office cat called", "relevant": ["cat"], "kind": "lexical"},
    ]
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"facts": facts, "queries": queries}))
    return path


async def test_mrr_counts_the_whole_ranking_and_mrr10_the_top_ten(
    database_url: str, nats_url: str, org: str, embedder: MiniLM, tmp_path: Path
) -> None:
    async with EchoStack(database_url=database_url, nats_url=nats_url, org=org, embedder=embedder,
                         services=("writes", "retrieval"), retrieval=UNGATED) as stack:
        async def call(service: str, verb: str, args: dict) -> dict:
            return await stack.admin_call(service, verb, args, timeout=120)

        report = await run_agent_facts(call, _dataset(tmp_path), context=True)

    rows = {row["query"]: row for row in report["per_query"]}
    assert rows["top"] == {"kind": "lexical", "query": "top", "hit1": 1.0, "hit10": 1.0, "mrr": 1.0, "mrr10": 1.0}
    deep = rows["deep"]
    assert deep["hit10"] == 0.0 and deep["mrr10"] == 0.0
    assert deep["mrr"] == 1 / 13  # found, and ranked below all twelve backup facts
    assert report["overall"]["mrr"] == round((1 + 1 / 13) / 2, 4)
    assert report["overall"]["mrr10"] == 0.5
    assert report["ranking_depth"] == 100 and report["top10_same_as_ranking"] == 2
    # Tokens are those of the top-10 recall an agent makes, not of the deeper ranking.
    assert 0 < report["context"]["tokens_per_recall_mean"] < report["context"]["full_notes_dump_tokens"]
