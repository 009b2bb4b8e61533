"""Helpers for the audit tests: writes and reads through one agent's real MCP client."""

from __future__ import annotations

from typing import Any

from mcp import Client


class Writer:
    """write_episode / query_memory / record_recall_save through one agent's MCP client."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def write(self, entities: list[Any], facts: list[dict[str, Any]], *,
                    session: str = "s-1", **extra: Any) -> dict[str, Any]:
        result = await self.client.call_tool("write_episode", {
            "session_id": session, "project": "ops",
            "entities": [e if isinstance(e, dict) else {"name": e[0], "type": e[1]} for e in entities], "facts": facts, **extra,
        })
        assert not result.is_error, result.content
        return result.structured_content

    async def query(self, query: str, **extra: Any) -> dict[str, Any]:
        result = await self.client.call_tool("query_memory", {"query": query, **extra})
        assert not result.is_error, result.content
        return result.structured_content

    async def save(self, fact_id: str, read_id: str, note: str) -> dict[str, Any]:
        result = await self.client.call_tool("record_recall_save", {"fact_id": fact_id, "read_id": read_id, "note": note})
        assert not result.is_error, result.content
        return result.structured_content

    async def audit(self, **args: Any) -> dict[str, Any]:
        result = await self.client.call_tool("get_audit_log", args)
        assert not result.is_error, result.content
        return result.structured_content

def fact(source: str, target: str, relation: str, text: str, hint: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"source": source, "target": target, "relation": relation, "fact": text,
                            "confidence": "extracted"}
    if hint:
        body["causal_hint"] = hint
    return body
