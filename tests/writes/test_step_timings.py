"""The profiling hook (libs/server/telemetry/steps.py): a write's steps are timed only while collecting.

The writes service's routes on the in-memory broker, committing through the real pool (the commit
is one of the steps), and the real model; the profiler (lab/write_profile.py) reads the same list.
"""

from __future__ import annotations

from echo_memory.libs.server.telemetry import steps
from echo_memory.libs.testing.agents import Agent, Routes
from tests.writes.conftest import PAYMENTS, call

WRITE_STEPS = {"validate_args", "check_shape", "resolve_scope", "embed_facts", "embed_names", "lock_wait",
               "insert_entities", "insert_episode", "insert_facts", "audit", "outbox", "commit", "request"}


async def test_a_write_is_timed_step_by_step_only_while_collecting(routes: Routes) -> None:
    client = Agent(routes, "claude-code")
    sink = steps.collect()
    try:
        _, stored = await call(client, "write_episode", PAYMENTS)
    finally:
        steps.stop()
    assert stored["stored"] is True, stored
    writes = [timings for verb, timings in sink if verb == "write_episode"]
    assert len(writes) == 1, sink
    assert set(writes[0]) >= WRITE_STEPS, sorted(writes[0])
    assert all(ms >= 0 for ms in writes[0].values())
    assert writes[0]["request"] >= writes[0]["commit"]

    seen = len(sink)
    _, again = await call(client, "write_episode", {**PAYMENTS, "session_id": "s-2"})
    assert again["stored"] is False, again  # the same claim: unchanged
    assert len(sink) == seen, "timing must be off once the profiler stops"
