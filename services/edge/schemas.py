"""Output schemas as published to MCP clients: the contract models' schemas, flattened.

The MCP SDK client validates every tool result against the tool's output schema with
`jsonschema`, in Python, on every call. Pydantic's schema for a result nests `$ref`s to `$defs`
and spells each optional field as `anyOf: [{type: X}, {type: null}]`; each `$ref` is resolved and
each `anyOf` branch tried per item, which cost a client ~3.9 ms per query_memory result of ten
items. The same constraints written without references and with type lists
(`type: [X, "null"]`) validate in ~2 ms. Both forms accept and refuse exactly the same documents.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

_SIMPLE_BRANCH = {"type", "format"}


class _Recursive(Exception):
    """A model refers to itself: its schema cannot be written without references."""


def client_output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s JSON schema with every local `$ref` inlined and simple `anyOf`s as type lists.

    A self-referencing model keeps pydantic's schema unchanged.
    """
    schema = model.model_json_schema()
    try:
        return dict(_flatten(schema, schema.get("$defs", {}), ()))
    except _Recursive:
        return schema


def _flatten(node: Any, defs: dict[str, Any], inside: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_flatten(item, defs, inside) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in inside:
            raise _Recursive(name)
        # Pydantic puts no keyword beside a $ref but annotations (title, description, default).
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return {**_flatten(defs[name], defs, (*inside, name)), **_flatten(rest, defs, inside)}
    out = {key: _flatten(value, defs, inside) for key, value in node.items() if key != "$defs"}
    branches = out.get("anyOf")
    if isinstance(branches, list) and _simple(branches) and "type" not in out:
        del out["anyOf"]
        out["type"] = [b["type"] for b in branches]
        formats = {b["format"] for b in branches if "format" in b}
        if formats:
            out["format"] = formats.pop()  # a string format is ignored for the other types
    return out


def _simple(branches: list[Any]) -> bool:
    """Branches that differ only in type, with at most one string format among them."""
    if not all(isinstance(b, dict) and set(b) <= _SIMPLE_BRANCH and isinstance(b.get("type"), str) for b in branches):
        return False
    types = [b["type"] for b in branches]
    formatted = [b for b in branches if "format" in b]
    return len(set(types)) == len(types) and len(formatted) <= 1 and all(b["type"] == "string" for b in formatted)
