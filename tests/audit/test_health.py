"""`health` on a real store with known content: every figure checked against what was done to it.

Three agents are wired (claude-code writes, reads and saves; cursor only gets a deferral; codex
never calls), the admin identity writes one fact and imports two turns, and then the lexical
statistics and the embedding record are damaged by hand to see `index_state` name the reindex.

The figures compare write times (the last real write, the admin's after it), so the known store is
written on every service's routes with each request committing; the deferral and the refusals run
on the handler tier, and the command itself on the full stack.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.core.contracts.health import HealthResult
from echo_memory.libs.server.embed import count_tokens
from echo_memory.libs.server.store.migrations import CODE_SCHEMA_VERSION
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import Answers, Routes, issue_token, make_scope, wire
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.edge.tools import TOOLS
from tests.audit.audit_helpers import Writer, fact

REPO = Path(__file__).resolve().parents[2]
TEXTS = ["The payments service charges cards through Stripe.", "The billing app stores invoices in PostgreSQL."]
ADMIN_TEXT = "The nightly export job writes to S3."


async def _sql(database: str | psycopg.AsyncConnection, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    if isinstance(database, psycopg.AsyncConnection):
        cur = await database.execute(query, params)
        return await cur.fetchall() if cur.description else []
    async with await psycopg.AsyncConnection.connect(database, autocommit=True) as conn:
        return await _sql(conn, query, params)


async def _health(answers: Answers, **args: Any) -> HealthResult:
    return HealthResult.model_validate(await answers.admin_call("audit", "health", args))


async def _fill(answers: Answers) -> dict[str, Any]:
    """The known content; returns what the test compares the figures with."""
    await issue_token(answers, "codex")
    w = Writer(await wire(answers, "claude-code"))
    first = await w.write([("Payments service", "service"), ("Stripe", "vendor")],
                          [fact("Payments service", "Stripe", "charges cards through", TEXTS[0])])
    await w.write([("Billing app", "service"), ("PostgreSQL", "database")],
                  [fact("Billing app", "PostgreSQL", "stores invoices in", TEXTS[1])])
    hit = await w.query("how are cards charged?")
    miss = await w.query("anything", about=["No such entity"])
    await w.save(first["edges_created"][0]["fact_id"], hit["read_id"], "used it")
    cursor = await wire(answers, "cursor")
    result = await cursor.call_tool("write_episode", {
        "session_id": "s-9", "entities": [{"name": "Postgres", "type": "database"},
                                          {"name": "Search service", "type": "service"}],
        "facts": [fact("Search service", "Postgres", "indexes", "The search service indexes rows from Postgres.")],
    })
    assert result.structured_content["not_stored"] == "deferred", result.content
    await answers.admin_call("writes", "write_episode", {
        "session_id": "admin-load", "entities": [{"name": "Export job", "type": "job"}, {"name": "S3", "type": "store"}],
        "facts": [fact("Export job", "S3", "writes to", ADMIN_TEXT)]})
    await answers.admin_call("writes", "import_episodes", {"episodes": [
        {"kind": "turn", "content": "user: where do exports go?"}, {"kind": "turn", "content": "bot: to S3"}]})
    return {"hit_tokens": hit["total_tokens"], "miss_results": len(miss["results"])}


async def test_every_figure_matches_the_known_store(routes: Routes) -> None:
    before = datetime.now(tz=UTC)
    known = await _fill(routes)
    assert known["miss_results"] == 0
    result = await _health(routes)
    f = result.figures

    assert f.scopes == ["shared"]
    assert (f.facts, f.active_facts, f.bulk_facts, f.imported_episodes) == (3, 3, 1, 2)
    assert f.bulk_share == pytest.approx(1 / 3)
    [(claude_last,)] = await _sql(routes.database_url, "SELECT max(written_at) FROM facts WHERE agent_id = 'claude-code'")
    assert f.last_real_write == claude_last and f.last_write is not None and f.last_write > claude_last
    assert f.hours_since_real_write is not None and 0 <= f.hours_since_real_write < 1
    assert [(w.agent_id, w.facts) for w in f.writers] == [("admin", 1), ("claude-code", 2)]
    assert f.agents_wired == ["claude-code", "codex", "cursor"]
    assert f.agents_never_writing == ["codex", "cursor"]
    assert (f.reads, f.reads_with_results, f.saves) == (2, 1, 1)
    assert f.reads_per_day == pytest.approx(2 / 7)
    assert f.read_hit_share == pytest.approx(0.5) and f.saves_per_read == pytest.approx(0.5)
    assert f.recall_tokens_mean == pytest.approx(known["hit_tokens"] / 2)  # the miss returned 0 tokens
    assert f.full_dump_tokens == sum(count_tokens(t) for t in [*TEXTS, ADMIN_TEXT])
    assert f.recall_share_of_dump == pytest.approx(known["hit_tokens"] / 2 / f.full_dump_tokens)
    assert f.deferred_waiting == 1
    assert f.lexical_stale == [] and f.embedding_mismatch == []
    assert (f.schema_version, f.code_schema_version) == (CODE_SCHEMA_VERSION, CODE_SCHEMA_VERSION)
    assert f.calibration.ran is False

    checks = {c.name: c for c in result.checks}
    assert sum(c.weight for c in result.checks) == 100
    assert result.score == round(sum(c.points for c in result.checks))
    assert checks["write_freshness"].points == 20 and checks["write_freshness"].status == "strong"
    assert checks["bulk_share"].points == 5
    assert checks["consolidation"].status == "strong" and "not run" in checks["consolidation"].detail
    assert f.consolidation.failures == 0 and f.consolidation.last_run is None
    assert checks["agents_writing"].points == pytest.approx(5) and "codex, cursor" in checks["agents_writing"].detail
    assert checks["read_rate"].points == pytest.approx(10 * 2 / 7, abs=0.01)
    assert checks["read_hits"].points == pytest.approx(10 * 0.5 / 0.8, abs=0.01)
    assert checks["saves_per_read"].status == "strong"
    assert checks["deferred_writes"].status == "weak" and checks["deferred_writes"].points == 0
    assert checks["calibration"].status == "weak" and "never run" in checks["calibration"].detail
    assert checks["index_state"].status == "strong" and checks["schema_version"].status == "strong"
    assert result.weak[0] == "agents_writing"  # 10 points lost, the most
    assert set(result.strong) | set(result.weak) == set(checks)
    assert result.generated_at >= before


async def test_an_answered_deferral_stops_waiting(handlers: Handlers) -> None:
    await issue_token(handlers, "codex")
    c = await wire(handlers, "cursor")
    w = Writer(c)
    await w.write([("PostgreSQL", "database"), ("Billing app", "service")],
                  [fact("Billing app", "PostgreSQL", "stores invoices in", TEXTS[1])])
    variant = {"session_id": "s-2", "entities": [{"name": "Postgres", "type": "database"},
                                                 {"name": "Search service", "type": "service"}],
               "facts": [fact("Search service", "Postgres", "indexes", "The search service indexes Postgres.")]}
    deferred = (await c.call_tool("write_episode", variant)).structured_content
    assert deferred["not_stored"] == "deferred"
    assert (await _health(handlers)).figures.deferred_waiting == 1
    pg_id = deferred["deferred"][0]["candidates"][0]["entity_id"]
    answer = {**variant, "entity_resolutions": [{"mention": "Postgres", "entity_id": pg_id}]}
    assert (await c.call_tool("write_episode", answer)).structured_content["stored"] is True
    assert (await _health(handlers)).figures.deferred_waiting == 0
    [(resolution,)] = await _sql(handlers.conn, "SELECT resolution FROM deferred_mentions")
    assert resolution == pg_id


async def test_stale_statistics_a_foreign_model_and_a_calibration_run_are_reported(handlers: Handlers) -> None:
    await _fill(handlers)
    await _sql(handlers.conn, "UPDATE lexical_stats SET doc_count = doc_count + 5 WHERE corpus = 'facts'")
    await _sql(handlers.conn, "UPDATE scope_embeddings SET model = 'some-other-model'")
    await _sql(handlers.conn,
               "INSERT INTO resolution_calibration (computed_by, store_pairs, labelled_pairs, auc, auc_low, auc_high, "
               "deferral_precision, deferral_recall, defer_at, merge_at) "
               "VALUES ('admin', 12, 451, 0.91, 0.85, 0.95, 0.9, 0.8, 0.6, 0.9)")
    result = await _health(handlers)
    [stale] = result.figures.lexical_stale
    assert (stale.scope, stale.corpus, stale.rows, stale.stats_rows) == ("shared", "facts", 3, 8)
    assert [(e.scope, e.model) for e in result.figures.embedding_mismatch] == [("shared", "some-other-model")]
    index = next(c for c in result.checks if c.name == "index_state")
    assert index.status == "weak" and index.action == "echo-memory reindex --scope shared"
    calibration = result.figures.calibration
    assert calibration.ran and calibration.kind == "reported"
    assert calibration.reason == "AUC 0.910 (95% CI 0.850-0.950) on 12 store pairs and 451 labelled pairs"
    assert next(c for c in result.checks if c.name == "calibration").status == "strong"


async def test_one_scope_and_refusals(handlers: Handlers) -> None:
    await make_scope(handlers, "team-a")
    await _fill(handlers)
    team = await _health(handlers, scope="team-a")
    assert team.figures.scopes == ["team-a"] and team.figures.facts == 0 and team.figures.reads == 0
    assert team.figures.agents_wired == []  # default tokens grant shared and solo only

    with pytest.raises(EchoError) as missing:
        await _health(handlers, scope="nope")
    assert missing.value.code == "not_found"
    # Not an agent tool: the edge lists exactly TOOLS (tests/edge/test_tools_transports.py).
    assert "health" not in {spec.name for spec in TOOLS}


async def _cli(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    # A subprocess the event loop waits for without blocking: the services answer in this loop.
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "echo_memory.libs.local.cli", *args, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_the_cli_prints_the_report_and_the_json(stack: EchoStack, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")}
    env |= {"ECHO_MEMORY_HOME": str(tmp_path), "ECHO_MEMORY_NATS_URL": stack.nats_url, "ECHO_MEMORY_ORG": stack.org,
            "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "operator"), env.get("PYTHONPATH", "")])}
    code, out, err = await _cli(["health"], env)
    assert code == 0, err
    assert out.startswith("health: ") and "weak:" in out and "write_freshness" in out
    code, out, err = await _cli(["health", "--json"], env)
    assert code == 0, err
    body = json.loads(out)
    assert list(body)[:3] == ["format", "score", "generated_at"] and body["figures"]["facts"] == 0
    assert body["score"] == round(sum(c["points"] for c in body["checks"]))
