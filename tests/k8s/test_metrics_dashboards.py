"""The one scrape URL and the Grafana dashboard: every panel reads metrics the processes really emit.

A real stack (every service, the HTTP edge, real NATS and Postgres) is driven through the MCP
client; its /metrics is scraped over HTTP; the chart is rendered by the real helm binary and
every PromQL query of the dashboard is checked against the scrape: each metric name it reads is
emitted, and each label it groups by is on that metric. The figures themselves are checked
against the calls made. Recall spans carry the recall-cost attributes.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import re
import subprocess
from typing import Any

import httpx2
import pytest
import yaml
from k8s_support import CHART, strip_dependencies
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from echo_memory.libs.core.contracts.errors import BusTimeout
from echo_memory.libs.core.contracts.identity import admin_caller
from echo_memory.libs.core.contracts.subjects import SERVICES, request_subject
from echo_memory.libs.server.bus.broker import make_broker, subscriptions_registered
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import Writer, fact
from echo_memory.services.edge.metrics import EdgeMetrics

METRIC = re.compile(r"\b(echo_[a-z0-9_]+)\b")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
# Labels Prometheus adds to every scraped series (the dedupe of service series drops them).
TARGET_LABELS = {"instance", "pod", "endpoint", "container", "job"}


def _scrape(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """sample name -> [(labels, value)] of one exposition text."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def _value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    return sum(v for got, v in samples.get(name, []) if labels.items() <= got.items())


def _dashboard(helm_bin: pathlib.Path, tmp_path: pathlib.Path) -> dict[str, Any]:
    chart = strip_dependencies(CHART, tmp_path / "echo-memory")
    out = subprocess.run([str(helm_bin), "template", "rel", str(chart), "--set", "dashboard.enabled=true",
                          "--set", "natsAuth.seed=dashboard-test"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    [config_map] = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "ConfigMap"
                    and d["metadata"]["name"].endswith("-dashboard")]
    return dict(json.loads(config_map["data"]["echo-memory.json"]))


async def _drive(stack: EchoStack) -> dict[str, Any]:
    """Known calls: two stored writes, a restatement, a deferral, a refusal, two reads and a save."""
    async with stack.client(stack.issue_token("claude-code")) as c:
        w = Writer(c)
        invoices = "The billing app stores invoices in PostgreSQL."
        first = await w.write([("Billing app", "service"), ("PostgreSQL", "database")],
                              [fact("Billing app", "PostgreSQL", "stores invoices in", invoices)])
        await w.write([("API", "service"), ("Redis", "cache")], [fact("API", "Redis", "caches in", "The API caches in Redis.")])
        await w.write([("API", "service"), ("Redis", "cache")], [fact("API", "Redis", "caches in", "The API caches in Redis.")])
        deferred = await c.call_tool("write_episode", {
            "session_id": "s-2", "entities": [{"name": "Postgres", "type": "database"}, {"name": "Search", "type": "service"}],
            "facts": [fact("Search", "Postgres", "indexes", "Search indexes Postgres.")]})
        assert deferred.structured_content["not_stored"] == "deferred"
        refused = await c.call_tool("write_episode", {"session_id": "s-3", "entities": [], "facts": [
            fact("A", "B", "uses", "A uses B.")]})  # entities the facts name are missing
        assert refused.is_error
        hit = await w.query("where are invoices stored?")
        miss = await w.query("anything", about=["No such entity"])
        await w.save(first["edges_created"][0]["fact_id"], hit["read_id"], "used it")
    return {"hit": hit, "miss": miss, "refused_code": refused.structured_content["error"]["code"]}


async def test_every_dashboard_query_reads_metrics_the_stack_emits(
    stack: EchoStack, helm_bin: pathlib.Path, tmp_path: pathlib.Path, spans: InMemorySpanExporter
) -> None:
    spans.clear()
    known = await _drive(stack)
    base = stack.url.rsplit("/mcp", 1)[0]
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.get(f"{base}/metrics")
    assert response.status_code == 200
    samples = _scrape(response.text)

    # The figures are the calls made.
    for service in SERVICES:
        assert _value(samples, "echo_metrics_service_up", service=service) == 1, service
    assert _value(samples, "echo_writes_total", outcome="stored", reason="none") == 2
    assert _value(samples, "echo_writes_total", outcome="unchanged", reason="restated") == 1
    assert _value(samples, "echo_writes_total", outcome="deferred", reason="near_match") == 1
    assert _value(samples, "echo_writes_total", outcome="refused", reason=known["refused_code"]) == 1
    assert _value(samples, "echo_writes_facts_total", agent="claude-code") == 2
    hit, miss = known["hit"], known["miss"]
    assert _value(samples, "echo_recall_requests_total", agent="claude-code") == 2
    assert _value(samples, "echo_recall_empty_total", agent="claude-code") == 1 and not miss["results"]
    assert _value(samples, "echo_recall_tokens_returned_total", agent="claude-code") == hit["total_tokens"]
    assert _value(samples, "echo_recall_facts_returned_total", agent="claude-code") == sum(
        1 for i in hit["results"] if i["kind"] == "fact")
    dump = _value(samples, "echo_recall_tokens_full_dump_total", agent="claude-code")
    assert dump > hit["total_tokens"] / 2 and dump % 2 == 0  # the same two-fact scope dumped for both reads
    assert _value(samples, "echo_recall_channel_results_total", channel="dense") >= len(hit["results"]) - 1
    assert _value(samples, "echo_verb_duration_seconds_count", service="retrieval", verb="query_memory") == 2
    assert _value(samples, "echo_verb_errors_total", service="writes", verb="write_episode",
                  code=known["refused_code"]) == 1
    assert _value(samples, "echo_edge_tool_calls_total", tool="write_episode", outcome="ok") == 4
    assert _value(samples, "echo_db_pool_max", service="retrieval", org=stack.org) > 0
    assert all("replica" in labels for labels, _ in samples["echo_verb_duration_seconds_count"])

    # Every panel of the rendered dashboard reads names the scrape holds, grouped by labels they carry.
    dashboard = _dashboard(helm_bin, tmp_path)
    checked = 0
    for panel in dashboard["panels"]:
        if panel["datasource"]["type"] != "prometheus":
            continue
        for target in panel["targets"]:
            expr = target["expr"]
            names = METRIC.findall(expr)
            assert names, (panel["title"], expr)
            for name in names:
                assert name in samples, f"panel {panel['title']!r} reads {name}, which no process emits"
            labels = {lab for name in names for got, _ in samples[name] for lab in got}
            for group in GROUPING.findall(expr):
                for label in (g.strip() for g in group.split(",") if g.strip()):
                    assert label in labels | TARGET_LABELS | {"le"}, (panel["title"], label)
            checked += 1
    assert checked >= 15
    tempo = [p for p in dashboard["panels"] if p["datasource"]["type"] == "tempo"]
    assert tempo and "span.echo.recall.tokens_returned" in tempo[0]["targets"][0]["query"]

    # The recall spans carry the cost.
    recalls = [s for s in spans.get_finished_spans() if "echo.recall.tokens_returned" in (s.attributes or {})]
    by_tokens = {s.attributes["echo.recall.tokens_returned"]: s.attributes for s in recalls}  # type: ignore[index]
    attrs = by_tokens[hit["total_tokens"]]
    assert attrs["echo.recall.facts_returned"] == sum(1 for i in hit["results"] if i["kind"] == "fact")
    assert attrs["echo.recall.full_dump_tokens"] == dump / 2
    assert list(attrs["echo.recall.channels"]) == sorted({c for i in hit["results"] for c in i["matched"]})
    assert by_tokens[0]["echo.recall.facts_returned"] == 0


async def test_a_silent_service_is_counted_as_a_bus_timeout(nats_url: str, org: str) -> None:
    """A subscriber that never answers: the caller gets BusTimeout and the edge's counters say so."""
    import nats

    async def never_answer(msg: object) -> None:
        await asyncio.sleep(0)

    silent = await nats.connect(nats_url)
    await silent.subscribe(request_subject(org, "causal", "trace_cause"), cb=never_answer)
    await subscriptions_registered(silent)
    broker = make_broker(nats_url)
    await broker.start()
    metrics = EdgeMetrics()
    try:
        with pytest.raises(BusTimeout):
            await BusClient(broker, on_error=metrics.bus_error).call_by_name(
                caller=admin_caller(org), service="causal", verb="trace_cause", args={}, timeout=0.3)
    finally:
        await broker.stop()
        await silent.close()
    samples = _scrape(metrics.render())
    assert _value(samples, "echo_bus_timeouts_total", service="causal", verb="trace_cause") == 1
    assert _value(samples, "echo_bus_errors_total", service="causal", verb="trace_cause", code="bus_timeout") == 1


async def test_a_service_that_is_not_running_shows_as_down_within_the_bound(
    database_url: str, nats_url: str, org: str, embedder: Any
) -> None:
    import time

    async with EchoStack(database_url=database_url, nats_url=nats_url, org=org, embedder=embedder,
                         services=("writes",)) as only_writes:
        base = only_writes.url.rsplit("/mcp", 1)[0]
        started = time.monotonic()
        async with httpx2.AsyncClient(timeout=30) as http:
            response = await http.get(f"{base}/metrics")
        took = time.monotonic() - started
    samples = _scrape(response.text)
    assert _value(samples, "echo_metrics_service_up", service="writes") == 1
    for missing in set(SERVICES) - {"writes"}:
        assert _value(samples, "echo_metrics_service_up", service=missing) == 0
        assert not [1 for labels, _ in samples["echo_verb_in_flight"] if labels["service"] == missing]
    assert took < 5  # the scrape waits SCRAPE_SECONDS for the missing ones, then answers
