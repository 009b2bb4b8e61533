"""Every tool's error results, through the real MCP client, against the output schema the tool publishes.

A client that validates structured content (the MCP Inspector, the SDK) must see the server's
message, not a schema violation: an error carries either structured content that fits the schema
(write_episode's refusal shape) or none, and always its typed error in `_meta`.
"""

from __future__ import annotations

from typing import Any

from jsonschema.validators import validator_for

from echo_memory.libs.testing import EchoStack, tool_error

# For each tool: a call with a bad argument, and one naming a scope the token cannot read.
BAD_CALLS: dict[str, list[dict[str, Any]]] = {
    "write_episode": [{"summary": "x", "facts": "not a list"}, {"summary": "x", "facts": [], "scope": "team-x"}],
    "query_memory": [{"query": "billing", "top_k": 10_000}, {"query": "billing", "scope": "team-x"}],
    "record_recall_save": [{"read_id": 5}, {"read_id": "r", "fact_ids": ["f"], "scope": "team-x"}],
    "pending_documents": [{"limit": -1}, {"scope": "team-x"}],
    "mark_ingested": [{"document_id": ["x"]}, {"document_id": "d", "scope": "team-x"}],
    "pending_episodes": [{"limit": 0}, {"scope": "team-x"}],
    "mark_distilled": [{"episode_ids": []}, {"episode_ids": ["00000000-0000-0000-0000-000000000000"]}],
    "trace_cause": [{"topic": 3}, {"topic": "deploy", "scope": "team-x"}],
    "get_audit_log": [{"limit": "many"}, {"scope": "team-x"}],
    "brief": [{"max_tokens": 1}, {"scope": "team-x"}],
}


async def test_every_error_result_fits_the_tools_published_output_schema(stack: EchoStack) -> None:
    token = stack.issue_token("ci-bot", read=["solo"], write=["solo"])
    async with stack.client(token) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == set(BAD_CALLS)
        for name, calls in BAD_CALLS.items():
            schema = tools[name].output_schema
            assert schema, name
            validator = validator_for(schema)(schema)
            for arguments in calls:
                result = await client.call_tool(name, arguments)
                error = tool_error(result)
                assert error["code"] in {"invalid_argument", "scope_denied", "not_found"}, (name, error)
                assert error["message"] in result.content[0].text
                if result.structured_content is not None:
                    problems = [e.message for e in validator.iter_errors(result.structured_content)]
                    assert problems == [], (name, arguments, problems)
                if name == "write_episode":  # the refusal keeps the tool's full result shape
                    assert result.structured_content["stored"] is False
                    assert result.structured_content["not_stored"] == "refused"
                    assert result.structured_content["error"]["code"] == error["code"]
