"""`echo-memory entities` end to end: agents write through their real MCP clients, a person runs the CLI.

Everything runs on the in-process stack (real nats-server, real Postgres, the HTTP edge); the CLI
is the real command in a subprocess acting as the org's admin over the bus.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from echo_memory.libs.testing import EchoStack

ROOT = Path(__file__).parents[2]
A, B = "Checkout service", "Storefront backend"


async def cli(stack: EchoStack, *words: str, group: str = "entities") -> tuple[int, str, str]:
    env = {**os.environ, "ECHO_MEMORY_NATS_URL": stack.nats_url, "ECHO_MEMORY_ORG": stack.org}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "echo_memory.libs.local.cli", group, *words, env=env, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def tool(client: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    assert not result.is_error, result.content
    return dict(result.structured_content or {})


def episode(source: str, target: str, relation: str, text: str, session: str) -> dict[str, Any]:
    return {"session_id": session, "entities": [{"name": source, "type": "service"}, {"name": target, "type": "tool"}],
            "facts": [{"source": source, "target": target, "relation": relation, "fact": text,
                       "confidence": "extracted"}]}


async def test_a_person_merges_unmerges_renames_and_lists_deferred_from_the_cli(stack: EchoStack) -> None:
    async with stack.client(stack.issue_token("claude-code")) as c:
        await tool(c, "write_episode", episode(A, "Postgres", "stores orders in",
                                               "The checkout service stores orders in Postgres.", "s-1"))
        b_fact = (await tool(c, "write_episode", episode(B, "Stripe", "charges cards through",
                                                         "The storefront backend charges cards through Stripe.",
                                                         "s-2")))["edges_created"][0]["fact_id"]
        looked = await tool(c, "write_episode", episode("Checkout servce", "Kafka", "publishes to",
                                                        "Checkout servce publishes to Kafka.", "s-3"))
        assert looked["deferred"], looked
        before = await tool(c, "query_memory", {"about": [A]})
        before_pair = await tool(c, "query_memory", {"about": [B, "Stripe"]})
        before_trace = await tool(c, "trace_cause", {"topic": B})
        before_why = await stack.admin_call("audit", "why", {"fact_id": b_fact})
        reads_made = set()

        code, out, err = await cli(stack, "list", "--deferred")
        assert code == 0, err
        assert "'Checkout servce' (scope shared, agent claude-code, deferred 1x" in out
        assert f"'{A}'" in out and "score" in out

        code, out, err = await cli(stack, "merge", A, B, "--reason", "one service, two names", "--json")
        assert code == 0, err
        merged = json.loads(out)
        assert merged["absorbed"]["name"] == B and merged["facts_following"] == 1
        during = await tool(c, "query_memory", {"about": [A]})
        reads_made.add(during["read_id"])
        assert b_fact in {r["id"] for r in during["results"]}
        trail = await stack.admin_call("audit", "why", {"fact_id": b_fact})
        source = next(e for e in trail["entities"] if e["role"] == "source")
        assert source["identity"][0]["reason"] == "one service, two names"

        code, out, err = await cli(stack, "merge", A, A.lower())
        assert code == 1 and "invalid_argument" in err and "cannot be merged into itself" in err, (out, err)

        code, out, err = await cli(stack, "unmerge", A, B)
        assert code == 0, err
        assert f"'{B}' is its own entity again" in out
        # Committed, over the wire: every answer is again exactly what it was before the merge.
        trail = await stack.admin_call("audit", "why", {"fact_id": b_fact})
        assert [e["kind"] for e in trail["entities"][0]["identity"]] == ["entity_merged", "entity_unmerged"]
        assert _without(trail, reads_made) == _without(before_why, set())
        after = await tool(c, "query_memory", {"about": [A]})
        assert {**after, "read_id": None} == {**before, "read_id": None}
        pair = await tool(c, "query_memory", {"about": [B, "Stripe"]})
        assert {**pair, "read_id": None} == {**before_pair, "read_id": None}
        assert await tool(c, "trace_cause", {"topic": B}) == before_trace
        code, out, err = await cli(stack, "unmerge", A, B)
        assert code == 1 and "is not an entity" in err, (out, err)
        code, out, err = await cli(stack, b_fact, group="why")
        assert code == 0, err
        assert "entity_merged by admin" in out and "one service, two names" in out
        assert "entity_unmerged by admin" in out and "answers now as entity" not in out

        code, out, err = await cli(stack, "rename", A, "Checkout API")
        assert code == 0, err
        assert f"renamed '{A}' to 'Checkout API'" in out and f"aliases: '{A}'" in out
        renamed = await tool(c, "query_memory", {"about": [A]})
        assert {r["source"] for r in renamed["results"]} == {"Checkout API"}

        code, out, err = await cli(stack, "rename", "Nobody", "Somebody")
        assert code == 1 and "not_found" in err, (out, err)


def _without(trail: dict[str, Any], reads_made: set[str]) -> dict[str, Any]:
    """A why answer minus its identity history and the reads the test made while merged."""
    return {**trail, "entities": [{k: v for k, v in e.items() if k != "identity"} for e in trail["entities"]],
            "reads": [r for r in trail["reads"] if r["read_id"] not in reads_made]}
