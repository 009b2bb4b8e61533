"""calibrate through the real stack: the store's decisions become labelled pairs, figures are recorded,
thresholds change only when asked, and writes follow the applied thresholds."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.testing import EchoStack
from tests.writes.conftest import Bus, call, episode, fact, sql


async def _decisions(stack: EchoStack) -> None:
    async with stack.client(stack.issue_token("claude-code")) as client:
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


async def test_calibrate_reports_store_and_shipped_figures_and_records_a_row_without_applying(stack: EchoStack) -> None:
    await _decisions(stack)
    result = await stack.admin_call("writes", "calibrate", {"rounds": 200})
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
    rows = await sql(stack.database_url, "SELECT applied, store_pairs, defer_at, merge_at FROM resolution_calibration")
    assert rows == [(False, 3, result["defer_at"], result["merge_at"])]


async def test_apply_records_thresholds_that_writes_then_follow(stack: EchoStack) -> None:
    await _decisions(stack)
    applied = await stack.admin_call("writes", "calibrate", {"rounds": 200, "apply": True})
    assert applied["applied"] is True
    [(defer_at, merge_at, was_applied)] = await sql(
        stack.database_url, "SELECT defer_at, merge_at, applied FROM resolution_calibration")
    assert (defer_at, merge_at, was_applied) == (applied["proposed_defer_at"], applied["proposed_merge_at"], True)
    # A later applied row governs the next write: with deferral at 0.99 a typo-like name is new.
    await sql(stack.database_url, "INSERT INTO resolution_calibration (computed_by, store_pairs, labelled_pairs, auc, "
                                  "auc_low, auc_high, deferral_precision, deferral_recall, defer_at, merge_at, applied) "
                                  "VALUES ('test', 0, 0, 0.9, 0.8, 0.95, 0.9, 0.9, 0.99, 0.99, true)")
    async with stack.client(stack.issue_token("cursor")) as client:
        _, result = await call(client, "write_episode", episode(
            [("Grafanaa", "tool"), ("Cron", "job")], [fact("Cron", "Grafanaa", "reports to", "Cron reports to Grafanaa.")]))
    assert result["stored"] is True and result["deferred"] == []


async def test_only_the_admin_may_calibrate(stack: EchoStack, bus: Bus) -> None:
    with pytest.raises(EchoError) as refused:
        await bus.verb("calibrate", {"rounds": 200}, agent="claude-code")
    assert refused.value.code == "scope_denied"
    assert await sql(stack.database_url, "SELECT count(*) FROM resolution_calibration") == [(0,)]


async def test_the_calibrate_command_prints_the_figures_and_json(stack: EchoStack) -> None:
    await _decisions(stack)
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


async def test_a_store_whose_own_decisions_contradict_the_score_is_not_applied(stack: EchoStack) -> None:
    await _decisions(stack)
    # Agents declared version-different names as aliases: 30 "same" pairs the score calls distinct.
    async with stack.client(stack.issue_token("codex")) as client:
        await call(client, "write_episode", episode(
            [{"name": "Postgres 15", "type": "database", "aliases": [f"Postgres {n}" for n in range(16, 31)]},
             {"name": "Node 18", "type": "runtime", "aliases": [f"Node {n}" for n in range(19, 34)]}],
            [fact("Node 18", "Postgres 15", "talks to", "Node 18 services talk to Postgres 15.")]))
    result = await stack.admin_call("writes", "calibrate", {"rounds": 200, "apply": True})
    assert result["store_pairs"] >= 33 and result["store"]["auc"] < 0.5 and result["store"]["auc_ci95"][0] < 0.5
    assert result["combined"]["auc_ci95"][0] > 0.5  # the shipped set alone would have let it through
    assert result["applied"] is False and "includes chance" in result["message"]
    assert await sql(stack.database_url, "SELECT applied FROM resolution_calibration") == [(False,)]
