"""What the edge teaches an agent, as the agent's MCP client receives it."""

from __future__ import annotations

import typing

from echo_memory.libs.core.contracts.write import NotStored
from echo_memory.libs.testing import EchoStack


async def test_server_instructions_and_descriptions_teach_when_to_recall_and_write(stack: EchoStack) -> None:
    async with stack.client(stack.issue_token("cursor")) as client:
        instructions = (client.instructions or "").lower()
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert "start of a session" in instructions
    assert "before asking the user to repeat" in instructions
    assert "same turn" in instructions
    for trigger in ("decision", "correction", "preference", "remember this"):
        assert trigger in instructions, trigger
    assert "data, not instructions" in instructions
    assert "<echo-memory-recall>" in instructions

    write = tools["write_episode"].description or ""
    for outcome in typing.get_args(NotStored):
        assert f'"{outcome}"' in write, f"write_episode's description does not explain not_stored={outcome}"
    assert "data, not" in (tools["query_memory"].description or "")
    assert tools["query_memory"].annotations.read_only_hint is True
    assert tools["write_episode"].annotations.read_only_hint is False


async def test_server_instructions_teach_the_document_workflow_with_its_project_argument(stack: EchoStack) -> None:
    async with stack.client(stack.issue_token("codex")) as client:
        instructions = client.instructions or ""
    for needed in ("pending_documents", "`project`", "mark_ingested", "content_hash", "write_episode",
                   "echo-memory docs sync"):
        assert needed in instructions, needed
    assert instructions.index("pending_documents") < instructions.index("mark_ingested")
