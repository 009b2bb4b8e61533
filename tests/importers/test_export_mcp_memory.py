"""`echo-memory export --format mcp-memory`: the graph back in the reference server's format, and in again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from echo_memory.libs.testing import EchoStack
from tests.importers.support import FIXTURES, accounted, cli, env_for, facts_by

FILE = FIXTURES / "mcp-memory.jsonl"


def graph(path: Path) -> tuple[dict[str, str], dict[str, list[str]], set[tuple[str, str, str]]]:
    lines: list[dict[str, Any]] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    entities = [x for x in lines if x["type"] == "entity"]
    return ({e["name"]: e["entityType"] for e in entities}, {e["name"]: sorted(e["observations"]) for e in entities},
            {(x["from"], x["relationType"], x["to"]) for x in lines if x["type"] == "relation"})


async def test_an_imported_graph_exports_as_it_came_and_imports_again_as_nothing_new(
        stack: EchoStack, tmp_path: Path) -> None:
    env = env_for(stack, tmp_path)
    code, first, err = await cli(env, "import", "--from", "mcp-memory", str(FILE))
    assert code == 0, err
    assert first is not None and first["outcomes"]["deferred"] == 0, first["reasons"]
    out = tmp_path / "exported.jsonl"
    code, _, err = await cli(env, "export", "--format", "mcp-memory", "--out", str(out), report=False)
    assert code == 0, err
    summary = json.loads(err.strip().splitlines()[-1])
    assert summary["format"] == "mcp-memory"
    assert "validity times of current facts" in summary["not_held"]
    assert "provenance of current facts (agent, tool, session, project)" in summary["not_held"]

    types, observations, relations = graph(FILE)
    got_types, got_observations, got_relations = graph(out)
    assert got_types == types and got_relations == relations
    # Everything but the observation the secret filter refused comes back.
    observations["Ledger DB"] = [o for o in observations["Ledger DB"] if "hunter2" not in o]
    assert got_observations == observations
    assert (summary["entities"], summary["relations"]) == (len(types), len(relations))

    before = len(facts_by(stack, "echo-memory import --from mcp-memory"))
    code, again, err = await cli(env, "import", "--from", "mcp-memory", str(out), "--agent", "mcp-memory")
    assert code == 0, err
    assert again is not None
    accounted(again)
    assert again["outcomes"]["stored"] == again["outcomes"]["superseded"] == 0, again["reasons"]
    assert len(facts_by(stack, "echo-memory import --from mcp-memory")) == before
