"""calibrate: the store's decisions become labelled pairs, figures are recorded, thresholds change
only when asked, and writes follow the applied thresholds.

The verb runs on the handler tier; writes following the latest applied row run on every service's
routes with each request committing (the latest is by time, which rows of one rolled-back
transaction share); the command, over the real bus, on the full stack.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import Agent, Routes, caller
from echo_memory.libs.testing.tiers import Handlers
from tests.writes.conftest import call, episode, fact, sql


async def _decisions(client: Any) -> None:
    """An alias, a confirmed merge and a "new" answer, written by one agent's client."""
    await call(client, "write_episode", episode(
        [{"name": "Kubernetes", "type": "platform", "aliases": ["kube"]}, ("Grafana", "tool"), ("API", "service")],
        [fact("API", "Kubernetes", "runs on", "The API runs on Kubernetes."),
         fact("API", "Grafana", "is watched in", "The API is watched in Grafana.")]))
    confirm = episode([("Kuberentes", "platform"), ("Worker", "service")],
                      [fact("Worker", "Kuberentes", "runs on", "The worker runs on Kuberentes.")], session_id="s-2")
    _, deferred = await call(client, "write_episode", confirm)
    kubernetes = deferred["deferred"][0]["candidates"][0]["entity_id"]
    await call(client, "write_episode", {
        **confirm, "entity_resolutions": [{"mention": "Kuberentes", "entity_id": kubernetes}]})
    other = episode([("Grafanna", "tool"), ("Worker", "service")],
                    [fact("Worker", "Grafanna", "is watched in", "The worker is watched in Grafanna.")], session_id="s-3")
    await call(client, "write_episode", other)
    await call(client, "write_episode", {**other, "entity_resolutions": [{"mention": "Grafanna", "entity_id": "new"}]})


async def test_calibrate_reports_store_and_shipped_figures_and_records_a_row_without_applying(handlers: Handlers) -> None:
    await _decisions(Agent(handlers, "claude-code"))
    result = await handlers.admin_call("writes", "calibrate", {"rounds": 200})
    assert result["store_sources"] == {"confirmed_merges": 1, "new_answers": 1, "aliases": 1,
                                       "person_merges": 0, "person_unmerges": 0}
    assert result["store_pairs"] == 3
    assert result["store"]["variants"] == 2 and result["store"]["lookalikes"] == 1
    combined = result["combined"]
    assert combined["pairs"] >= 400 + 3
    low, high = combined["auc_ci95"]
    assert 0.5 < low <= combined["auc"] <= high <= 1.0
    assert 0.9 < combined["deferral_precision"] <= 1.0
    assert result["applied"] is False and "CI" in result["message"]
    rows = await sql(handlers.conn, "SELECT applied, store_pairs, defer_at, merge_at FROM resolution_calibration")
    assert rows == [(False, 3, result["defer_at"], result["merge_at"])]


async def test_apply_records_thresholds_that_writes_then_follow(routes: Routes) -> None:
    await _decisions(Agent(routes, "claude-code"))
    applied = await routes.admin_call("writes", "calibrate", {"rounds": 200, "apply": True})
    assert applied["applied"] is True
    [(defer_at, merge_at, was_applied)] = await sql(
        routes.database_url, "SELECT defer_at, merge_at, applied FROM resolution_calibration")
    assert (defer_at, merge_at, was_applied) == (applied["proposed_defer_at"], applied["proposed_merge_at"], True)
    # A later applied row governs the next write: with deferral at 0.99 a typo-like name is new.
    await sql(routes.database_url, "INSERT INTO resolution_calibration (computed_by, store_pairs, labelled_pairs, auc, "
                                  "auc_low, auc_high, deferral_precision, deferral_recall, defer_at, merge_at, applied) "
                                  "VALUES ('test', 0, 0, 0.9, 0.8, 0.95, 0.9, 0.9, 0.99, 0.99, true)")
    _, result = await call(Agent(routes, "cursor"), "write_episode", episode(
        [("Grafanaa", "tool"), ("Cron", "job")], [fact("Cron", "Grafanaa", "reports to", "Cron reports to Grafanaa.")]))
    assert result["stored"] is True and result["deferred"] == []


async def test_only_the_admin_may_calibrate(handlers: Handlers) -> None:
    with pytest.raises(EchoError) as refused:
        await handlers.call(caller(handlers.org, "claude-code"), "writes", "calibrate", {"rounds": 200})
    assert refused.value.code == "scope_denied"
    assert await sql(handlers.conn, "SELECT count(*) FROM resolution_calibration") == [(0,)]


async def test_the_calibrate_command_prints_the_figures_and_json(stack: EchoStack) -> None:
    async with stack.client(stack.issue_token("claude-code")) as client:
        await _decisions(client)
    env = {**os.environ, "ECHO_MEMORY_NATS_URL": stack.nats_url, "ECHO_MEMORY_ORG": stack.org}
    cli = [sys.executable, "-m", "echo_memory.libs.local.cli", "calibrate", "--rounds", "200"]
    proc = await asyncio.create_subprocess_exec(*cli, env=env, cwd=Path(__file__).parents[2],
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert "Resolution AUC" in text and "95% CI" in text and "store + shipped set" in text
    assert "store decisions: 3 pairs (1 confirmed merges, 1 new answers, 1 aliases, 0 person merges, 0 person unmerges)" in text
    proc = await asyncio.create_subprocess_exec(*cli, "--json", env=env, cwd=Path(__file__).parents[2],
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert json.loads(out)["applied"] is False
    bad = await asyncio.create_subprocess_exec(*cli[:-2], "--rounds", "5", env=env, stdout=asyncio.subprocess.PIPE,
                                               stderr=asyncio.subprocess.PIPE)
    _, err = await bad.communicate()
    assert bad.returncode == 1 and "invalid_argument" in err.decode()
    assert await sql(stack.database_url, "SELECT count(*) FROM resolution_calibration") == [(2,)]


async def test_a_store_whose_own_decisions_contradict_the_score_is_not_applied(handlers: Handlers) -> None:
    await _decisions(Agent(handlers, "claude-code"))
    # Agents declared version-different names as aliases: 30 "same" pairs the score calls distinct.
    await call(Agent(handlers, "codex"), "write_episode", episode(
        [{"name": "Postgres 15", "type": "database", "aliases": [f"Postgres {n}" for n in range(16, 31)]},
         {"name": "Node 18", "type": "runtime", "aliases": [f"Node {n}" for n in range(19, 34)]}],
        [fact("Node 18", "Postgres 15", "talks to", "Node 18 services talk to Postgres 15.")]))
    result = await handlers.admin_call("writes", "calibrate", {"rounds": 200, "apply": True})
    assert result["store_pairs"] >= 33 and result["store"]["auc"] < 0.5 and result["store"]["auc_ci95"][0] < 0.5
    assert result["combined"]["auc_ci95"][0] > 0.5  # the shipped set alone would have let it through
    assert result["applied"] is False and "includes chance" in result["message"]
    assert await sql(handlers.conn, "SELECT applied FROM resolution_calibration") == [(False,)]
