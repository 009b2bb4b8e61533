"""`as_of` as a caller takes it: `int(time.time())` right after a write, fractions, ISO-8601.

As an agent's tool calls through the edge's argument handling (libs/testing/agents.py), on every
service's routes on the in-memory broker: each write commits at its own time, as the answers here
depend on. Writes are started early in a second so that the write and the `int(time.time())` after
it fall in the same second, which is the case where reading `as_of` as the second's first instant
hid the write. A refused `as_of` needs no clock: on the handler tier.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from echo_memory.libs.testing.agents import Agent, Routes, ToolClient, call, episode, fact
from echo_memory.libs.testing.rows import sql
from echo_memory.libs.testing.tiers import Handlers

QUESTION = "which payment provider does billing use"


def _billing(text: str) -> dict[str, Any]:
    return episode([("Billing", "service"), ("Razorpay", "vendor")],
                   [fact("Billing", "Razorpay", "uses provider", text)])


async def _write_early_in_a_second(client: ToolClient, body: dict[str, Any]) -> tuple[str, int]:
    """(fact id, the Unix second the caller reads right after the write), both in one second."""
    await asyncio.sleep(1.05 - time.time() % 1)
    _, result = await call(client, "write_episode", body)
    second = int(time.time())
    assert result["stored"] is True, result
    return result["edges_created"][0]["fact_id"], second


async def _ids(client: ToolClient, as_of: object) -> list[str]:
    is_error, read = await call(client, "query_memory", {"query": QUESTION, "as_of": as_of, "include_episodes": False})
    assert not is_error, read
    return [r["id"] for r in read["results"]]


async def _valid_from(client: ToolClient, as_of: object) -> datetime:
    _, read = await call(client, "query_memory", {"query": QUESTION, "as_of": as_of, "include_episodes": False})
    return datetime.fromisoformat(read["results"][0]["provenance"]["valid_from"])


async def test_a_write_is_visible_as_of_the_whole_second_read_right_after_it(routes: Routes) -> None:
    client = Agent(routes, "claude-code")
    fact_id, second = await _write_early_in_a_second(client, _billing("Billing uses Razorpay for payments."))
    written = await _valid_from(client, second)
    assert int(written.timestamp()) == second  # the write is inside the second the caller names
    assert await _ids(client, second) == [fact_id]
    assert await _ids(client, str(second)) == [fact_id]
    assert await _ids(client, second - 1) == []


async def test_a_fact_superseded_in_a_later_second_reads_as_the_old_version_before(routes: Routes) -> None:
    client = Agent(routes, "claude-code")
    old, first = await _write_early_in_a_second(client, _billing("Billing uses Razorpay for payments."))
    new, second = await _write_early_in_a_second(client, _billing("Billing moved off Razorpay to Stripe."))
    assert second > first
    assert await _ids(client, first) == [old]
    assert await _ids(client, second) == [new]
    assert await _ids(client, None) == [new]

    at_first = datetime.fromtimestamp(first, tz=UTC)
    assert await _ids(client, at_first.strftime("%Y-%m-%dT%H:%M:%SZ")) == [old]
    plus_two = at_first.astimezone(timezone(timedelta(hours=2)))
    assert await _ids(client, plus_two.isoformat()) == [old]  # same instant, another offset
    assert await _ids(client, datetime.fromtimestamp(second, tz=UTC).date().isoformat()) == [new]  # end of day

    # A fraction names an instant, not a second: just before the old version's write, nothing.
    written = (await _valid_from(client, first)).timestamp()
    assert await _ids(client, written + 0.001) == [old]
    assert await _ids(client, written - 0.001) == []


@pytest.mark.parametrize("as_of", ["yesterday", True, -1, "2026-02-30", "1700000000x", 1e20, "0999-01-01", ""])
async def test_a_bad_as_of_is_a_typed_error_and_logs_no_read(handlers: Handlers, as_of: object) -> None:
    before = await sql(handlers.conn, "SELECT count(*) FROM reads")
    client = Agent(handlers, "claude-code")
    is_error, result = await call(client, "query_memory", {"query": QUESTION, "as_of": as_of})
    trace_error, traced = await call(client, "trace_cause", {"topic": "Billing", "as_of": as_of})
    assert is_error and trace_error
    for error in (result["error"], traced["error"]):
        assert error["code"] == "invalid_argument"
        assert "as_of" in error["message"]
    assert await sql(handlers.conn, "SELECT count(*) FROM reads") == before
