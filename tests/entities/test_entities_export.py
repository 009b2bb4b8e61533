"""A person's merges travel with an export: restored, the copy answers as the original did."""

from __future__ import annotations

import io
import json
from typing import Any

from echo_memory.libs.core.config import Settings
from echo_memory.libs.local.cli.audit_commands import admin_session, export_to, import_lines
from echo_memory.libs.testing import EchoStack

A, B, C = "Checkout service", "Storefront backend", "Image resizer"


def episode(source: str, target: str, relation: str, text: str) -> dict[str, Any]:
    return {"session_id": "s-1", "scope": "team-a",
            "entities": [{"name": source, "type": "service"}, {"name": target, "type": "tool"}],
            "facts": [{"source": source, "target": target, "relation": relation, "fact": text,
                       "confidence": "extracted"}]}


async def export_lines(settings: Settings, scope: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    async with admin_session(settings) as call:
        await export_to(call, out, scope=scope, progress=None, timeout=30)
    return [json.loads(line) for line in out.getvalue().splitlines()]


async def about(client: Any, name: str, scope: str) -> set[str]:
    result = await client.call_tool("query_memory", {"about": [name], "scope": scope})
    assert not result.is_error, result.content
    return {r["text"] for r in (result.structured_content or {})["results"]}


async def test_merges_in_force_and_undone_are_exported_and_restored(stack: EchoStack) -> None:
    await stack.admin_call("writes", "scope_create", {"name": "team-a"})
    token = stack.issue_token("claude-code", read=["team-a", "team-b"], write=["team-a", "team-b"])
    async with stack.client(token) as c:
        for args in (episode(A, "Postgres", "stores orders in", "The checkout service stores orders in Postgres."),
                     episode(B, "Stripe", "charges cards through", "The storefront backend charges through Stripe."),
                     episode(C, "S3", "reads from", "The image resizer reads from S3.")):
            result = await c.call_tool("write_episode", args)
            assert not result.is_error and (result.structured_content or {})["stored"], result.content
        await stack.admin_call("writes", "entity_merge", {"keep": A, "absorb": B, "scope": "team-a"})
        await stack.admin_call("writes", "entity_merge", {"keep": A, "absorb": C, "scope": "team-a"})
        await stack.admin_call("writes", "entity_unmerge", {"entity": A, "alias": C, "scope": "team-a"})
        original = await about(c, A, "team-a")
        assert len(original) == 2  # A's own fact and B's, not C's (that merge was undone)

        settings = Settings(org=stack.org, nats_url=stack.nats_url)
        lines = await export_lines(settings, "team-a")
        merges = [r for r in lines if r.get("type") == "entity_merge"]
        assert [(m["undone_at"] is None, m["merged_by"]) for m in merges] == [(True, "admin"), (False, "admin")]
        async with admin_session(settings) as call:
            restored = await import_lines(call, lines, scope="team-b", progress=None, timeout=30)
        assert restored.counts["entity_merge"] == 2 and restored.ids_kept is False

        assert await about(c, A, "team-b") == original
        assert await about(c, B, "team-b") == original  # B still answers as A in the copy
        assert await about(c, C, "team-b") == {"The image resizer reads from S3."}
        copy = [r for r in await export_lines(settings, "team-b") if r.get("type") == "entity_merge"]
        mapped = {old: new for old, new in restored.id_map.items()}
        for was, now in zip(merges, copy, strict=True):
            assert (now["absorbed_id"], now["surviving_id"]) == (mapped[was["absorbed_id"]], mapped[was["surviving_id"]])
            assert {k: v for k, v in now.items() if k not in ("id", "scope_id", "absorbed_id", "surviving_id")} == {
                k: v for k, v in was.items() if k not in ("id", "scope_id", "absorbed_id", "surviving_id")}
