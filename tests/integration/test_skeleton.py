"""The walking skeleton through the real MCP client over HTTP, against real NATS and Postgres."""

from __future__ import annotations

import time

import httpx2
import pytest

from echo_memory.libs.local.stack import tool_error
from echo_memory.libs.testing import EchoStack

FACT = {
    "session_id": "s-1",
    "project": "billing",
    "entities": [{"name": "Payments service", "type": "service"}, {"name": "Stripe", "type": "vendor"}],
    "facts": [
        {
            "source": "Payments service",
            "target": "Stripe",
            "relation": "charges cards through",
            "fact": "The payments service charges customer cards through Stripe.",
            "confidence": "extracted",
        }
    ],
}


async def test_a_written_fact_comes_back_ranked_with_score_and_provenance(stack: EchoStack) -> None:
    token = stack.issue_token("claude-code")
    async with stack.client(token) as client:
        written = await client.call_tool("write_episode", FACT)
        assert not written.is_error, written.content
        assert written.structured_content["stored"] is True
        fact_id = written.structured_content["edges_created"][0]["fact_id"]

        recalled = await client.call_tool("query_memory", {"query": "how are credit card payments processed?"})
    assert not recalled.is_error, recalled.content
    result = recalled.structured_content
    top = result["results"][0]
    assert top["id"] == fact_id
    assert top["rank"] == 1
    assert 0.3 < top["score"] <= 1.0
    assert top["provenance"]["agent_id"] == "claude-code"
    assert top["provenance"]["session_id"] == "s-1"
    assert top["provenance"]["project"] == "billing"
    assert result["read_id"]
    text = recalled.content[0].text
    assert text.startswith("<echo-memory-recall>") and text.rstrip().endswith("</echo-memory-recall>")


async def test_all_nine_tools_are_listed_with_their_contract_schemas(stack: EchoStack) -> None:
    from echo_memory.libs.core.contracts.write import WriteEpisodeInput

    async with stack.client(stack.issue_token("cursor")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {
        "write_episode", "query_memory", "record_recall_save", "pending_documents",
        "mark_ingested", "trace_cause", "get_audit_log", "pending_episodes", "mark_distilled",
    }
    assert tools["write_episode"].input_schema["properties"].keys() == WriteEpisodeInput.model_json_schema()["properties"].keys()
    assert "session_id" in tools["write_episode"].input_schema["required"]


async def test_http_without_or_with_a_wrong_token_is_401(stack: EchoStack) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with httpx2.AsyncClient(timeout=10) as http:
        missing = await http.post(stack.url, json=body)
        wrong = await http.post(stack.url, json=body, headers={"Authorization": f"Bearer em_{stack.org}_nope"})
    assert missing.status_code == 401
    assert wrong.status_code == 401


async def test_a_stopped_service_gives_a_retryable_error_within_the_timeout(stack: EchoStack) -> None:
    token = stack.issue_token("claude-code")
    await stack.stop("retrieval")
    async with stack.client(token) as client:
        started = time.monotonic()
        result = await client.call_tool("query_memory", {"query": "anything"})
        elapsed = time.monotonic() - started
    assert result.is_error
    error = tool_error(result)
    assert error["retryable"] is True
    assert error["code"] in ("unavailable", "bus_timeout")
    assert "retrieval" in error["message"]
    assert elapsed < stack.settings.timeouts.read + 1


async def test_consolidation_answers_over_the_bus_and_a_dry_run_changes_nothing(stack: EchoStack) -> None:
    # The full-stack check of the consolidation service: its process, subscriber and reply over NATS.
    result = await stack.admin_call("consolidation", "consolidate", {"dry_run": True})
    assert result["dry_run"] is True and result["runs"], result
    assert all(run["run_id"] is None for run in result["runs"])
    assert (await stack.admin_call("consolidation", "consolidate_log", {}))["runs"] == []
    from echo_memory.libs.core.contracts.errors import NotFound

    with pytest.raises(NotFound):
        await stack.admin_call("consolidation", "consolidate", {"scope": "no-such-scope"})


@pytest.mark.parametrize(
    "arguments, fragment",
    [
        ({"query": "x", "top_k": 0}, "top_k"),
        ({"query": "x", "top_k": 101}, "top_k"),
        ({"query": "x", "unknown": 1}, "unknown"),
        ({"query": "x", "about": ["a", "b", "c"]}, "about"),
    ],
)
async def test_bad_query_arguments_are_refused_typed(stack: EchoStack, arguments: dict, fragment: str) -> None:
    async with stack.client(stack.issue_token("codex")) as client:
        result = await client.call_tool("query_memory", arguments)
    assert result.is_error
    error = tool_error(result)
    assert error["code"] == "invalid_argument" and error["retryable"] is False
    assert fragment in error["message"]


async def test_one_trace_links_edge_bus_service_and_sql(stack: EchoStack, spans) -> None:  # type: ignore[no-untyped-def]
    token = stack.issue_token("claude-code")
    async with stack.client(token) as client:
        spans.clear()
        result = await client.call_tool("write_episode", FACT)
    assert not result.is_error
    finished = spans.get_finished_spans()
    tool_span = next(s for s in finished if s.name.startswith("tools/call") and "write_episode" in s.name)
    trace_id = tool_span.context.trace_id
    in_trace = [s for s in finished if s.context.trace_id == trace_id]
    names = {s.name for s in in_trace}
    assert any(n.endswith("writes.write_episode create") or n.endswith("write_episode publish") for n in names), names
    assert any("write_episode process" in n for n in names), names
    assert any(n == "db insert_fact" for n in names), names


async def test_each_service_names_itself_in_its_spans(stack: EchoStack, spans) -> None:  # type: ignore[no-untyped-def]
    """The stack hosts every service in this one process, as `up` does: each span still names its own."""
    async with stack.client(stack.issue_token("claude-code")) as client:
        assert not (await client.call_tool("write_episode", FACT)).is_error
        spans.clear()
        assert not (await client.call_tool("write_episode", FACT)).is_error
        assert not (await client.call_tool("query_memory", {"query": "payments"})).is_error
    finished = spans.get_finished_spans()

    def services(fragment: str) -> set[str]:
        return {str(s.resource.attributes["service.name"]) for s in finished if fragment in s.name}

    assert services("write_episode process") == {"echo-memory-writes"}
    assert services("query_memory process") == {"echo-memory-retrieval"}
    sql = {s.name: str(s.resource.attributes["service.name"]) for s in finished if s.name.startswith("db ")}
    assert sql, [s.name for s in finished]
    assert set(sql.values()) <= {"echo-memory-writes", "echo-memory-retrieval"}, sql
    assert "echo-memory-writes" in set(sql.values()) and "echo-memory-retrieval" in set(sql.values()), sql
