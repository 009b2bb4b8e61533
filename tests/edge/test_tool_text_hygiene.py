"""Text hygiene end to end, through the real MCP SDK client: refused characters are invalid_argument
(retryable false) naming the field and store nothing; zero-width characters are removed before storing."""

from __future__ import annotations

from typing import Any

import psycopg
from mcp import Client

from echo_memory.libs.local.stack import tool_error
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import PAYMENTS
from echo_memory.libs.testing.rows import counts

ONE = PAYMENTS["facts"][0]
NUL, RLO, RLI, ESC, ZWSP, BOM = "\x00", "\u202e", "\u2067", "\x1b", "\u200b", "\ufeff"

# (tool, arguments, the field the error must name)
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("query_memory", {"query": f"which{NUL} vendor"}, "query"),
    ("query_memory", {"query": f"which {RLO}rodnev"}, "query"),
    ("query_memory", {"about": ["Stripe", f"Pay{RLI}ments"]}, "about"),
    ("trace_cause", {"topic": f"outage{NUL}"}, "topic"),
    ("trace_cause", {"topic": f"out{RLO}age"}, "topic"),
    ("get_audit_log", {"agent": f"claude{NUL}-code"}, "agent"),
    ("get_audit_log", {"agent": f"claude{ESC}[2J"}, "agent"),
    ("write_episode", {**PAYMENTS, "facts": [{**ONE, "fact": f"The payments service{NUL} uses Stripe."}]}, "facts.0.fact"),
    ("write_episode", {**PAYMENTS, "facts": [{**ONE, "fact": f"Payments {RLO}epirtS sesu."}]}, "facts.0.fact"),
    ("write_episode", {**PAYMENTS, "entities": [{"name": f"Stripe{RLI}", "type": "vendor"}]}, "entities.0.name"),
    ("write_episode", {**PAYMENTS, "session_id": f"s{ESC}1"}, "session_id"),
]


async def _refusal(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    return tool_error(result)


async def test_control_and_bidi_characters_are_refused_typed_naming_the_field_and_store_nothing(
    stack: EchoStack,
) -> None:
    problems = []
    async with stack.client(stack.issue_token("claude-code")) as client:
        for tool, arguments, field in REFUSED:
            error = await _refusal(client, tool, arguments)
            if not (error["code"] == "invalid_argument" and error["retryable"] is False
                    and error["message"].startswith(f"invalid arguments: {field}: ")
                    and " contains " in error["message"]):
                problems.append((tool, field, error))
    assert problems == []
    assert sum((await counts(stack.database_url)).values()) == 0


async def test_zero_width_characters_are_removed_before_storing(stack: EchoStack) -> None:
    hidden = {
        **PAYMENTS,
        "entities": [{"name": f"Payments{ZWSP} service", "type": "service"},
                     {"name": f"{BOM}Str{ZWSP}ipe", "type": "vendor"}],
        "facts": [{**ONE, "source": f"Payments{ZWSP} service", "target": f"{BOM}Str{ZWSP}ipe",
                   "fact": f"The payments service charges cards through Str{ZWSP}ipe."}],
    }
    async with stack.client(stack.issue_token("claude-code")) as client:
        written = await client.call_tool("write_episode", hidden)
        assert not written.is_error, written.content
        recalled = await client.call_tool("query_memory", {"about": [f"Str{ZWSP}ipe"]})
    assert not recalled.is_error, recalled.content
    assert [r["text"] for r in recalled.structured_content["results"]] == [
        "The payments service charges cards through Stripe."
    ]
    with psycopg.connect(stack.database_url) as conn:
        names = sorted(r[0] for r in conn.execute("SELECT name FROM entities").fetchall())
        facts = [r[0] for r in conn.execute("SELECT text FROM facts").fetchall()]
    assert names == ["Payments service", "Stripe"]
    assert facts == ["The payments service charges cards through Stripe."]
