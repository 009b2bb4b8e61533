"""`echo-memory eval` with no dataset: queries made from the user's own facts, scored in a throw-away
copy; `--context --sweep` over subsamples of those facts; `--ablate` pairs each channel off against
the full system. The user's running store (a real stack here) holds the same rows afterwards."""

from __future__ import annotations

import json
import os

import pytest

from echo_memory.libs.local.eval.own_store import derive_queries, paired, subsample
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import Writer, fact
from tests.bench.test_eval_leaves_no_trace import REPO, _cli, _snapshot
from tests.dashboard.dashboard_support import seed

pytestmark = pytest.mark.timeout(600)


def _lines() -> list[dict[str, object]]:
    """A tiny export: A depends_on B, A depends_on C, D owns A, and an ended version A depends_on E."""
    ents = [{"type": "entity", "id": e, "name": f"svc-{e}"} for e in "ABCDE"]
    facts = [
        {"type": "fact", "id": "f1", "source_entity": "A", "target_entity": "B", "relation": "depends_on",
         "t_invalid": None, "token_count": 5, "t_valid": "2026-01-01T00:00:00+00:00"},
        {"type": "fact", "id": "f2", "source_entity": "A", "target_entity": "C", "relation": "depends_on",
         "t_invalid": None, "token_count": 7, "t_valid": "2026-01-02T00:00:00+00:00"},
        {"type": "fact", "id": "f3", "source_entity": "D", "target_entity": "A", "relation": "owns",
         "t_invalid": None, "token_count": 4, "t_valid": "2026-01-03T00:00:00+00:00"},
        {"type": "fact", "id": "f0", "source_entity": "A", "target_entity": "E", "relation": "depends_on",
         "t_invalid": "2026-01-01T00:00:00+00:00", "token_count": 6, "t_valid": "2025-12-01T00:00:00+00:00"},
    ]
    return [{"format": "x", "counts": {}}, *ents, *facts, {"type": "end", "counts": {}}]


def test_queries_are_derived_from_facts_with_the_facts_as_labels() -> None:
    queries = {q.text: q for q in derive_queries(_lines(), limit=10)}
    assert queries["svc-A depends on"].gold == {"f1", "f2"}  # both active facts answer it, not the ended one
    assert queries["svc-A depends on"].kind == "forward"
    assert queries["depends on svc-B"].gold == {"f1"} and queries["depends on svc-B"].kind == "reverse"
    assert queries["svc-D and svc-A"].gold == {"f3"} and queries["svc-D and svc-A"].kind == "pair"
    assert "svc-A and svc-E" not in queries  # an ended fact makes no query
    assert len(queries) == 8  # 3 facts x 3 kinds, "svc-A depends on" made twice and kept once
    assert [q.text for q in derive_queries(_lines(), limit=2, seed=3)] == \
        [q.text for q in derive_queries(_lines(), limit=2, seed=3)]  # the same seed, the same queries
    part = subsample(_lines(), 1, seed=0)
    assert sum(r.get("type") == "fact" for r in part) == 1 and part[-1]["counts"]["fact"] == 1


def test_paired_differences_have_intervals_and_refuse_other_queries() -> None:
    base = [{"query": f"q{i}", "kind": "forward", "hit10": 1.0, "mrr10": 1.0} for i in range(20)]
    worse = [{**r, "hit10": 0.0 if i < 10 else 1.0, "mrr10": 0.5} for i, r in enumerate(base)]
    result = paired(base, worse)
    assert result["overall"]["hit10"]["diff"] == -0.5 and result["overall"]["hit10"]["down"] == 10
    low, high = result["overall"]["hit10"]["ci95"]
    assert low < -0.5 < high < 0
    with pytest.raises(ValueError):
        paired(base, list(reversed(worse)))


async def test_eval_on_the_own_store_leaves_it_unchanged(stack: EchoStack, embedder: MiniLM, tmp_path) -> None:  # type: ignore[no-untyped-def]
    await seed(stack, embedder, facts=150, scope="demo")
    async with stack.client(stack.issue_token("claude-code")) as c:
        writer = Writer(c)
        await writer.write([("API", "service"), ("Redis", "cache")],
                           [fact("API", "Redis", "caches in", "The API caches sessions in Redis.")])
        await writer.write([("API", "service"), ("Postgres", "database")],
                           [fact("API", "Postgres", "stores orders in", "The API stores orders in Postgres.")])
    before = await _snapshot(stack.database_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")}
    env |= {"ECHO_MEMORY_HOME": str(tmp_path / "home"), "ECHO_MEMORY_NATS_URL": stack.nats_url,
            "ECHO_MEMORY_ORG": stack.org, "ECHO_MEMORY_DATABASE_URL": stack.database_url,
            "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "operator"), env.get("PYTHONPATH", "")])}

    code, out, err = await _cli(["eval", "--scope", "demo", "--queries", "20", "--context", "--sweep",
                                 "--sweep-sizes", "30,100000", "--ablate", "--json"], env)
    assert code == 0, err[-3000:]
    report = json.loads(out)
    assert report["dataset"] == "own-store" and report["scope"] == "demo"
    assert 20 <= report["queries"] <= 60 and len(report["per_query"]) == report["queries"]
    overall = report["overall"]
    assert overall["hit10"] >= 0.5  # queries name the entities: most find their own fact
    assert overall["hit10_ci95"][0] <= overall["hit10"] <= overall["hit10_ci95"][1]
    assert set(report["by_kind"]) == {"forward", "reverse", "pair"}
    assert 0 < report["context"]["tokens_per_recall_mean"] < report["context"]["full_notes_dump_tokens"]
    sizes = [row["facts"] for row in report["sweep"]]
    assert sizes[0] == 30 and sizes[-1] == report["active_facts"]
    assert set(report["ablation"]) == {"dense", "lexical", "graph", "neighbour"}
    for result in report["ablation"].values():
        assert result["overall"]["n"] == report["queries"]
        low, high = result["overall"]["mrr10"]["ci95"]
        assert low <= result["overall"]["mrr10"]["diff"] <= high
    assert await _snapshot(stack.database_url) == before

    code, out, err = await _cli(["eval", "--queries", "5"], env)  # the default scope, shared
    assert code == 0, err[-3000:]
    assert out.startswith("own store, scope 'shared': 2 active facts") and "95% CI" in out
    overall = next(line.split() for line in out.splitlines() if line.startswith("overall"))
    assert float(overall[1]) > 0  # hit@10 of queries naming the API and its stores
    assert await _snapshot(stack.database_url) == before

    code, _, err = await _cli(["eval", "--scope", "nothing-here"], env)
    assert code == 1 and "nothing-here" in err
