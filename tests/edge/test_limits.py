"""Limits of the HTTP edge: rate, body size, result size, origins, hosts; health and metrics."""

from __future__ import annotations

import contextlib

import httpx2
from edge_support import extra_edge, mcp_client
from prometheus_client.parser import text_string_to_metric_families

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.config.edge import EdgeSettings
from echo_memory.libs.local.stack import tool_error
from echo_memory.libs.local.supervisor.nats import NatsServer
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.testing import EchoStack, server_dir
from echo_memory.services.edge.app import start_edge

INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def _headers(token: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json", **extra}


async def test_a_token_past_its_rate_gets_rate_limited_with_retry_after_and_others_do_not(stack: EchoStack) -> None:
    async with extra_edge(stack, rate_per_minute=6, rate_burst=3) as edge:
        busy, calm = stack.issue_token("busy-bot"), stack.issue_token("calm-bot")
        async with mcp_client(edge.url, busy) as client:
            results = [await client.call_tool("query_memory", {"query": "deploys"}) for _ in range(4)]
        async with mcp_client(edge.url, calm) as client:
            unaffected = await client.call_tool("query_memory", {"query": "deploys"})
        metrics = edge.guards.metrics.render()
    assert [r.is_error for r in results] == [False, False, False, True]
    error = tool_error(results[3])
    assert error["code"] == "rate_limited" and error["retryable"] is True
    assert 5 < error["retry_after"] <= 10.5  # one call per 10 s at 6 a minute
    assert "rate_limited" in results[3].content[0].text
    assert not unaffected.is_error
    calls = {(s.labels["tool"], s.labels["outcome"]): s.value for f in text_string_to_metric_families(metrics)
             for s in f.samples if s.name == "echo_edge_tool_calls_total"}
    assert calls[("query_memory", "rate_limited")] == 1 and calls[("query_memory", "ok")] == 4


async def test_a_rate_limited_write_answers_with_the_write_shape(stack: EchoStack) -> None:
    async with (
        extra_edge(stack, rate_per_minute=1, rate_burst=1) as edge,
        mcp_client(edge.url, stack.issue_token("writer")) as client,
    ):
        await client.call_tool("query_memory", {"query": "x"})
        refused = await client.call_tool("write_episode", {"session_id": "s", "facts": []})
    body = refused.structured_content
    assert refused.is_error and body["stored"] is False and body["not_stored"] == "refused"
    assert body["error"]["code"] == "rate_limited" and body["retryable"] is True


async def test_a_body_over_the_limit_is_413_and_small_ones_pass(stack: EchoStack) -> None:
    async with extra_edge(stack, max_body_bytes=4096) as edge:
        token = stack.issue_token("cursor")
        big = {**INIT, "params": {**INIT["params"], "clientInfo": {"name": "x" * 8000, "version": "1"}}}
        async with httpx2.AsyncClient(timeout=10) as http:
            refused = await http.post(edge.url, json=big, headers=_headers(token))
            accepted = await http.post(edge.url, json=INIT, headers=_headers(token))
    assert refused.status_code == 413
    assert accepted.status_code == 200


async def test_query_results_are_capped_by_the_edge_whatever_max_tokens_asks(stack: EchoStack) -> None:
    facts = [
        {"source": f"Service {i}", "target": "Kafka", "relation": "publishes to",
         "fact": f"Service {i} publishes its order events to the Kafka cluster in region {i}.",
         "confidence": "extracted"}
        for i in range(6)
    ]
    entities = [{"name": f"Service {i}", "type": "service"} for i in range(6)] + [{"name": "Kafka", "type": "queue"}]
    token = stack.issue_token("cursor")
    async with stack.client(token) as client:
        written = await client.call_tool("write_episode", {"session_id": "s", "entities": entities, "facts": facts})
        assert not written.is_error, written.content
        full = await client.call_tool("query_memory", {"query": "which services publish to Kafka?",
                                                       "include_episodes": False})
    async with extra_edge(stack, max_result_tokens=40) as edge, mcp_client(edge.url, token) as client:
        capped = await client.call_tool("query_memory", {"query": "which services publish to Kafka?",
                                                         "include_episodes": False, "max_tokens": 100_000})
    assert len(full.structured_content["results"]) == 6
    assert full.structured_content["total_tokens"] > 40
    result = capped.structured_content
    assert 1 <= len(result["results"]) < 6
    assert result["total_tokens"] <= 40
    assert "max_tokens=40" in (result["note"] or "")


async def test_browser_origins_not_allowed_are_403_and_configured_ones_pass(stack: EchoStack) -> None:
    token = stack.issue_token("cursor")
    port = stack.url.split(":")[2].split("/")[0]
    async with extra_edge(stack, allowed_origins=["https://app.example.com"]) as edge:
        edge_port = edge.url.split(":")[2].split("/")[0]
        async with httpx2.AsyncClient(timeout=10) as http:
            evil = await http.post(stack.url, json=INIT, headers=_headers(token, Origin="https://evil.example"))
            own = await http.post(stack.url, json=INIT, headers=_headers(token, Origin=f"http://localhost:{port}"))
            configured = await http.post(edge.url, json=INIT,
                                         headers=_headers(token, Origin="https://app.example.com"))
            not_on_this_edge = await http.post(stack.url, json=INIT,
                                               headers=_headers(token, Origin="https://app.example.com"))
            no_token_evil = await http.post(edge.url, json=INIT, headers={"Origin": "https://evil.example"})
            other_port = await http.post(edge.url, json=INIT,
                                         headers=_headers(token, Origin=f"http://localhost:{port}"))
    assert evil.status_code == 403 and evil.json()["error"] == "origin_not_allowed"
    assert own.status_code == 200
    assert configured.status_code == 200
    assert not_on_this_edge.status_code == 403
    assert no_token_evil.status_code == 403  # refused before authentication is even tried
    assert edge_port != port and other_port.status_code == 200  # a page on this machine, another port


async def test_any_loopback_origin_passes_and_look_alikes_do_not(stack: EchoStack) -> None:
    """A browser-based client on this machine (the Inspector on :6274) may call; foreign pages may not."""
    token = stack.issue_token("cursor")
    loopback = ["http://localhost:6274", "http://127.0.0.1:3000", "http://[::1]:8080", "http://localhost",
                "https://127.0.0.1:8443"]
    foreign = ["http://localhost.evil.com", "http://localhost:6274.evil.com", "http://127.0.0.1.nip.io:6274",
               "http://evil.com:6274", "null", "http://localhost:", "http://localhost:80abc", "file://"]
    async with httpx2.AsyncClient(timeout=10) as http:
        for origin in loopback:
            response = await http.post(stack.url, json=INIT, headers=_headers(token, Origin=origin))
            assert response.status_code == 200, origin
        for origin in foreign:
            response = await http.post(stack.url, json=INIT, headers=_headers(token, Origin=origin))
            assert response.status_code == 403, origin


async def test_a_foreign_host_header_is_refused_on_a_loopback_edge(stack: EchoStack) -> None:
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(stack.url, json=INIT,
                                   headers=_headers(stack.issue_token("cursor"), Host="evil.example.com"))
    assert response.status_code == 421


async def test_the_edge_binds_loopback_unless_configured() -> None:
    assert Settings().edge_host == "127.0.0.1"
    assert Settings(edge_host="0.0.0.0").edge_host == "0.0.0.0"


async def test_healthz_is_live_readyz_follows_the_bus_and_services_and_metrics_render(nats_url: str) -> None:
    server = NatsServer(server_dir("edge-nats"), free_port())
    server.start()
    settings = Settings(org="t-health", nats_url=server.url, edge_port=free_port())
    edge = await start_edge(settings, EdgeSettings())
    try:
        async with httpx2.AsyncClient(timeout=10) as http:
            base = edge.base_url
            assert (await http.get(f"{base}/healthz")).status_code == 200
            ready = await http.get(f"{base}/readyz")  # the bus is up, but no service runs on it
            assert ready.status_code == 503 and ready.json()["status"] == "writes and retrieval not answering"
            metrics = await http.get(f"{base}/metrics")
            assert metrics.status_code == 200 and "echo_edge_tool_calls_total" in metrics.text
            server.stop()
            down = await http.get(f"{base}/readyz")
            assert down.status_code == 503 and down.json()["status"] == "bus unreachable"
            assert (await http.get(f"{base}/healthz")).status_code == 200
    finally:
        edge.web.should_exit = True
        await edge.task
        with contextlib.suppress(Exception):  # the bus is gone on purpose; closing may complain
            await edge.broker.stop()
        server.stop()
