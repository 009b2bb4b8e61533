"""A source name that may be a stored entity is deferred with its candidates, not guessed."""

from __future__ import annotations

from pathlib import Path

from echo_memory.libs.testing import EchoStack
from tests.importers.support import FIXTURES, accounted, cli, env_for, facts_by


async def test_a_near_match_defers_its_records_with_candidates(stack: EchoStack, tmp_path: Path) -> None:
    await stack.admin_call("writes", "write_episode", {
        "session_id": "s-1", "entities": [{"name": "Ledger Database", "type": "database"}],
        "facts": [{"source": "Ledger Database", "target": "Ledger Database", "relation": "hosted on",
                   "fact": "Ledger Database is hosted on the main cluster", "confidence": "extracted"}]})
    env = env_for(stack, tmp_path)
    code, report, err = await cli(env, "import", "--from", "mcp-memory", str(FIXTURES / "mcp-memory.jsonl"))
    assert code == 0, err
    assert report is not None
    accounted(report)
    deferred = [r for r in report["reasons"] if r["outcome"] == "deferred"]
    assert deferred, report["reasons"]
    assert all(r["mention"] == "Ledger DB" for r in deferred)
    assert all("Ledger Database" in [c["name"] for c in r["candidates"]] for r in deferred)
    stored = facts_by(stack, "echo-memory import --from mcp-memory")
    assert not any("Ledger DB" in (f["source"], f["target"]) for f in stored)
    assert len(stored) == report["outcomes"]["stored"] + report["outcomes"]["superseded"]
