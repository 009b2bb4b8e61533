"""A knowledge graph file with broken and hostile lines: each refused with its line, the rest read."""

from __future__ import annotations

import json
from pathlib import Path

from echo_memory.libs.local.importers import mcp_memory
from echo_memory.libs.local.importers.records import MAX_FACT_CHARS
from echo_memory.libs.testing import EchoStack
from tests.importers.support import FIXTURES, cli, env_for, facts_by


def test_each_bad_line_is_refused_with_its_reason_and_nothing_is_cut(tmp_path: Path) -> None:
    good = (FIXTURES / "mcp-memory.jsonl").read_bytes()
    long_observation = "x" * MAX_FACT_CHARS
    lines = [
        b'{"type": "entity", "name": "Alice"',  # 1: cut off
        b"[1, 2]",  # 2: not an object
        json.dumps({"type": "note", "name": "x"}).encode(),  # 3: unknown type
        json.dumps({"type": "entity", "entityType": "person", "observations": []}).encode(),  # 4: no name
        json.dumps({"type": "entity", "name": "Eve", "entityType": "person", "observations": "hi"}).encode(),  # 5
        json.dumps({"type": "entity", "name": "Mal", "entityType": "person",
                    "observations": [42, long_observation, "fine"]}).encode(),  # 6
        json.dumps({"type": "relation", "from": "Mal", "to": 7, "relationType": "knows"}).encode(),  # 7
        b'{"type": "entity", "name": "\xff\xfe", "entityType": "x", "observations": []}',  # 8: not UTF-8
        json.dumps({"type": "entity", "name": "Nul", "entityType": "x", "observations": ["a\u0000b"]}).encode(),  # 9
        b"   ",  # blank: not a record
    ]
    path = tmp_path / "memory.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n" + good)
    records = list(mcp_memory.read(path))
    refused = {r.where: r.reason or "" for r in records if r.outcome == "refused"}
    assert "not JSON" in refused["line 1"]
    assert "not a JSON object" in refused["line 2"]
    assert "neither 'entity' nor 'relation'" in refused["line 3"]
    assert "needs a string name" in refused["line 4"]
    assert "not a list" in refused["line 5"]
    assert "not a string" in refused["line 6, observation 1"]
    assert f"at most {MAX_FACT_CHARS}" in refused["line 6, observation 2"], "a long observation is refused, not cut"
    assert "needs string from, to" in refused["line 7"]
    assert "not UTF-8" in refused["line 8"]
    assert "NUL" in refused["line 9, observation 1"]
    assert len(refused) == 10
    # Lines 5 and 6 still give their entity; the good graph after the bad lines is read in full.
    fine = [r for r in records if r.outcome is None]
    good_lines = [json.loads(line) for line in good.decode().splitlines() if line.strip()]
    expected = sum(1 + len(x["observations"]) if x["type"] == "entity" else 1 for x in good_lines)
    assert len(fine) == expected + 2 + 1 + 1  # Eve, Mal and Nul entities, Mal's "fine" observation
    assert all(len(r.fact.text) <= MAX_FACT_CHARS for r in fine if r.fact)


def test_a_missing_or_non_file_path_is_refused() -> None:
    from echo_memory.libs.core.contracts.errors import InvalidArgument
    from echo_memory.libs.local.importers.sources import FROM_SOURCES, plain_path

    source = FROM_SOURCES["mcp-memory"]
    for text, words in (("/nonexistent/memory.jsonl", "not a file"), (str(FIXTURES), "not a file"),
                        (f"{FIXTURES}/../fixtures/mcp-memory.jsonl", "'..'")):
        try:
            source.check(plain_path(text))
        except InvalidArgument as exc:
            assert words in exc.message
        else:
            raise AssertionError(f"{text} was accepted")


async def test_a_scope_that_does_not_exist_stops_the_run_and_stores_nothing(stack: EchoStack, tmp_path: Path) -> None:
    env = env_for(stack, tmp_path)
    code, report, err = await cli(env, "import", "--from", "mcp-memory", str(FIXTURES / "mcp-memory.jsonl"),
                                  "--scope", "no-such-scope")
    assert code == 1 and report is None
    assert "not_found" in err or "scope_denied" in err, err
    assert facts_by(stack, "echo-memory import --from mcp-memory") == []
