"""Helpers for the audit tests: a fact with its causal hint as the fifth argument."""

from __future__ import annotations

from typing import Any

from echo_memory.libs.testing.agents import Writer

__all__ = ["Writer", "fact"]


def fact(source: str, target: str, relation: str, text: str, hint: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"source": source, "target": target, "relation": relation, "fact": text,
                            "confidence": "extracted"}
    if hint:
        body["causal_hint"] = hint
    return body
