"""`echo-memory import --from mcp-memory` on a file the real reference server wrote, end to end."""

from __future__ import annotations

import json
from pathlib import Path

from echo_memory.libs.local.importers.state import from_state_path
from echo_memory.libs.testing import EchoStack
from tests.importers.support import FIXTURES, accounted, audit_kinds, cli, env_for, facts_by

FILE = FIXTURES / "mcp-memory.jsonl"
TOOL = "echo-memory import --from mcp-memory"


def source_counts() -> tuple[int, int, int]:
    """(entities, observations, relations) in the fixture, counted from the file itself."""
    lines = [json.loads(line) for line in FILE.read_text().splitlines() if line.strip()]
    entities = [x for x in lines if x["type"] == "entity"]
    return len(entities), sum(len(e["observations"]) for e in entities), sum(x["type"] == "relation" for x in lines)


async def test_every_record_is_stored_or_reported_and_a_rerun_stores_nothing(stack: EchoStack, tmp_path: Path) -> None:
    env = env_for(stack, tmp_path)
    n_entities, n_observations, n_relations = source_counts()
    total = n_entities + n_observations + n_relations

    code, dry, err = await cli(env, "import", "--from", "mcp-memory", str(FILE), "--dry-run")
    assert code == 0, err
    assert dry is not None and dry["records"] == total and dry["would_write"] == total
    assert dry["kinds"] == {"entity": n_entities, "observation": n_observations, "relation": n_relations}
    assert facts_by(stack, TOOL) == [] and not from_state_path(tmp_path / "echo").exists(), "a dry run writes nothing"

    code, first, err = await cli(env, "import", "--from", "mcp-memory", str(FILE))
    assert code == 0, err
    assert first is not None
    accounted(first)
    # The one observation holding a password is refused by the secret filter, naming its place.
    refused = [r for r in first["reasons"] if r["outcome"] == "refused"]
    assert len(refused) == 1 and "secret" in refused[0]["reason"] and "observation 3" in refused[0]["where"]
    facts = facts_by(stack, TOOL)
    written = first["outcomes"]["stored"] + first["outcomes"]["superseded"]
    assert len(facts) == written and written + first["outcomes"]["deferred"] == total - 1
    assert "hunter2" not in json.dumps(facts)

    # Faithful: every entity with its type, every observation as a fact about it, every relation.
    lines = [json.loads(line) for line in FILE.read_text().splitlines() if line.strip()]
    deferred_where = {r["where"] for r in first["reasons"] if r["outcome"] == "deferred"}
    by_text = {f["text"]: f for f in facts}
    for number, item in enumerate(lines, start=1):
        if item["type"] == "entity":
            if f"line {number}" not in deferred_where:
                fact = by_text[f"{item['name']} is a {item['entityType']}"]
                assert (fact["source"], fact["source_type"]) == (item["name"], item["entityType"])
            for index, observation in enumerate(item["observations"], start=1):
                if "hunter2" in observation or f"line {number}, observation {index}" in deferred_where:
                    continue
                fact = by_text[f"{item['name']}: {observation}"]
                assert fact["source"] == fact["target"] == item["name"]
        elif f"line {number}" not in deferred_where:
            fact = by_text[f"{item['from']} {item['relationType']} {item['to']}"]
            assert (fact["source"], fact["relation"], fact["target"]) == (item["from"], item["relationType"], item["to"])
    assert {f["agent"] for f in facts} == {"mcp-memory"}
    kinds = audit_kinds(stack, TOOL)
    assert kinds.get("fact_created", 0) + kinds.get("fact_superseded", 0) == written, kinds

    code, second, err = await cli(env, "import", "--from", "mcp-memory", str(FILE))
    assert code == 0, err
    assert second is not None
    accounted(second)
    assert second["outcomes"]["stored"] == second["outcomes"]["superseded"] == 0
    assert len(facts_by(stack, TOOL)) == written

    # Without the progress file the store itself recognises every record: still nothing new.
    from_state_path(tmp_path / "echo").unlink()
    code, third, err = await cli(env, "import", "--from", "mcp-memory", str(FILE), "--agent", "mcp-memory")
    assert code == 0, err
    assert third is not None
    accounted(third)
    assert len(facts_by(stack, TOOL)) == written
