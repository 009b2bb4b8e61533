"""`status` per scope: which agents wrote, how much, when last — from the writes service's real verb.

Writers are ordered by their last write, so each request commits at its own time (every service's
routes on the in-memory broker) rather than sharing one rolled-back transaction's `now()`.
"""

from __future__ import annotations

from echo_memory.libs.core.contracts.admin import StatusResult
from echo_memory.libs.local.cli.system import render_store
from echo_memory.libs.testing.agents import Agent, Routes, make_scope
from tests.audit.audit_helpers import Writer, fact


async def test_status_lists_each_scopes_writers_newest_first(routes: Routes) -> None:
    await make_scope(routes, "team-a")
    w = Writer(Agent(routes, "claude-code", write=["shared", "team-a"]))
    await w.write([("API", "service"), ("Redis", "cache")], [fact("API", "Redis", "caches in", "The API caches in Redis.")])
    await w.write([("API", "service"), ("Redis", "cache")],
                  [fact("API", "Redis", "caches in", "The API caches sessions in Redis.")])  # supersedes
    await w.write([("Team A", "team"), ("Oncall", "rota")], [fact("Team A", "Oncall", "runs", "Team A runs oncall.")],
                  scope="team-a")
    await Writer(Agent(routes, "cursor")).write(
        [("Web", "app"), ("API", "service")], [fact("Web", "API", "calls", "The web app calls the API.")])

    result = StatusResult.model_validate(await routes.admin_call("writes", "status", {}))
    by_scope = {s.scope: s for s in result.scopes}
    shared = by_scope["shared"]
    assert (shared.facts, shared.active_facts) == (3, 2)
    assert [(a.agent_id, a.facts, a.active_facts) for a in shared.writers] == [("cursor", 1, 1), ("claude-code", 2, 1)]
    assert shared.last_write == shared.writers[0].last_write
    assert [(a.agent_id, a.facts) for a in by_scope["team-a"].writers] == [("claude-code", 1)]

    lines = render_store(result)
    at = lines.index(next(line for line in lines if line.startswith("scope shared:")))
    assert lines[at].startswith("scope shared: 2 active facts, 3 in history, last write ")
    assert lines[at + 1].split()[:5] == ["cursor", "1", "active", "1", "in"]
    assert lines[at + 2].split()[:5] == ["claude-code", "1", "active", "2", "in"]
