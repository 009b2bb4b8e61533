"""Every input field of every tool, as an agent's MCP client receives the tool list, says what it is for."""

from __future__ import annotations

from typing import Any

from echo_memory.libs.core.contracts.audit import AUDIT_KINDS
from echo_memory.libs.testing import EchoStack


def undescribed(schema: dict[str, Any]) -> list[str]:
    """Dotted paths of every object property, at any depth and in every definition, with no description.

    A property that is only a reference to a definition counts as described when the definition is.
    """
    found: list[str] = []
    definitions = schema.get("$defs", {})

    def described(prop: dict[str, Any]) -> bool:
        if prop.get("description"):
            return True
        ref = prop.get("$ref") or next((p.get("$ref") for p in prop.get("allOf", []) if "$ref" in p), None)
        return bool(ref and definitions.get(ref.rsplit("/", 1)[-1], {}).get("description"))

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for name, prop in (node.get("properties") or {}).items():
                if not described(prop):
                    found.append(f"{path}.{name}")
            for key, value in node.items():
                if key != "$defs":
                    walk(value, f"{path}.{key}" if key not in ("properties", "items", "anyOf", "allOf") else path)
        elif isinstance(node, list):
            for value in node:
                walk(value, path)

    walk({k: v for k, v in schema.items() if k != "$defs"}, "")
    for name, definition in definitions.items():
        walk(definition, f"$defs.{name}")
    return found


def test_the_walk_finds_a_field_without_a_description() -> None:
    schema = {"properties": {"a": {"type": "string", "description": "x"}, "b": {"type": "integer"},
                             "c": {"$ref": "#/$defs/C"}, "d": {"type": "array", "items": {"$ref": "#/$defs/D"}}},
              "$defs": {"C": {"description": "a C", "properties": {"e": {"type": "string"}}},
                        "D": {"properties": {"f": {"type": "string", "description": "an f"}}}}}
    assert sorted(undescribed(schema)) == ["$defs.C.e", ".b", ".d"]


async def test_every_tool_input_field_has_a_description(stack: EchoStack) -> None:
    async with stack.client(stack.issue_token("cursor")) as client:
        tools = (await client.list_tools()).tools
    assert len(tools) >= 7
    missing = {t.name: undescribed(t.input_schema) for t in tools}
    assert {name: paths for name, paths in missing.items() if paths} == {}


async def test_get_audit_log_kind_is_an_enum_of_the_kinds_it_records(stack: EchoStack) -> None:
    async with stack.client(stack.issue_token("cursor")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    kind = tools["get_audit_log"].input_schema["properties"]["kind"]
    enums = [option["enum"] for option in kind.get("anyOf", [kind]) if "enum" in option]
    assert enums == [list(AUDIT_KINDS)], kind
    assert {"type": "null"} in kind["anyOf"]  # leaving it out still means every kind
