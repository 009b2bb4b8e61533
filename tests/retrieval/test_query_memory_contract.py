"""query_memory's contract over the real bus and MCP edge"""

from __future__ import annotations

import math
import time

import psycopg
import pytest

from echo_memory.libs.local.stack import tool_error
from echo_memory.libs.testing import EchoStack


def fact(source: str, target: str, relation: str, text: str, scope: str | None = None) -> dict:
    body = {
        "session_id": "s-1",
        "entities": [{"name": source, "type": "thing"}, {"name": target, "type": "thing"}],
        "facts": [{"source": source, "target": target, "relation": relation, "fact": text, "confidence": "extracted"}],
    }
    if scope:
        body["scope"] = scope
    return body


async def write(stack: EchoStack, body: dict) -> str:
    result = await stack.admin_call("writes", "write_episode", body)
    assert result["stored"], result
    return result["edges_created"][0]["fact_id"]


async def query(stack: EchoStack, **args: object) -> dict:
    return await stack.admin_call("retrieval", "query_memory", args)


@pytest.mark.parametrize(
    "args, fragment",
    [
        ({"query": "x", "top_k": 0}, "top_k"),
        ({"query": "x", "top_k": 101}, "top_k"),
        ({"query": "x", "about": ["a", "b", "c"]}, "about"),
        ({"query": "x", "about": []}, "about"),
        ({"query": "x", "as_of": -1}, "as_of"),
        ({"query": "x", "max_tokens": 0}, "max_tokens"),
        ({}, "query is required"),
        ({"query": "x", "colour": "red"}, "colour"),
    ],
)
async def test_bad_input_is_a_typed_error_never_clamped(stack: EchoStack, args: dict, fragment: str) -> None:
    async with stack.client(stack.issue_token("cursor")) as client:
        result = await client.call_tool("query_memory", args)
    assert result.is_error
    error = tool_error(result)
    assert error["code"] == "invalid_argument"
    assert fragment in error["message"]


async def test_about_is_exact_case_insensitive_never_substring(stack: EchoStack) -> None:
    await write(stack, fact("Payments service", "Stripe", "charges through", "Payments charge cards through Stripe."))
    await write(stack, fact("Auth service", "Postgres", "stores sessions in", "Auth stores sessions in Postgres."))
    exact = await query(stack, query="card payments", about=["payments SERVICE"])
    assert [r["relation"] for r in exact["results"]] == ["charges through"]
    assert exact["results"][0]["matched"] == ["about"]
    substring = await query(stack, query="card payments", about=["Payments"])
    assert substring["results"] == []
    assert "no entity is named 'Payments'" in substring["note"]
    pair = await query(stack, about=["Stripe", "payments service"])
    assert len(pair["results"]) == 1
    unconnected = await query(stack, about=["Stripe", "Postgres"])
    assert unconnected["results"] == []
    assert "'Stripe' and 'Postgres' are not connected" in unconnected["note"]


async def test_as_of_sees_the_store_as_it_was_across_supersession(stack: EchoStack) -> None:
    old = await write(stack, fact("Billing", "Razorpay", "uses provider", "Billing uses Razorpay for payments."))
    time.sleep(1.1)
    between = int(time.time())
    time.sleep(1.1)
    new = await write(stack, fact("Billing", "Razorpay", "uses provider", "Billing moved off Razorpay to Stripe."))
    now = await query(stack, query="which payment provider does billing use", include_episodes=False)
    assert [r["id"] for r in now["results"]] == [new]
    then = await query(stack, query="which payment provider does billing use", as_of=between, include_episodes=False)
    assert [r["id"] for r in then["results"]] == [old]
    assert then["results"][0]["provenance"]["valid_until"] is not None
    before = await query(stack, query="which payment provider does billing use", as_of=between - 100)
    assert before["results"] == [] and "as of" in before["note"]


async def test_two_scopes_with_near_identical_facts_never_leak(stack: EchoStack) -> None:
    await stack.admin_call("writes", "scope_create", {"name": "team-a"})
    await stack.admin_call("writes", "scope_create", {"name": "team-b"})
    a = await write(stack, fact("API", "Redis", "caches in", "The API caches sessions in Redis.", "team-a"))
    b = await write(stack, fact("API", "Redis", "caches in", "The API caches sessions in Redis!", "team-b"))
    only_a = await query(stack, query="where are sessions cached", scope="team-a")
    assert [r["id"] for r in only_a["results"]] == [a]
    assert only_a["results"][0]["provenance"]["scope"] == "team-a"
    token = stack.issue_token("codex", read=["team-b"], write=["team-b"])
    async with stack.client(token) as client:
        denied = await client.call_tool("query_memory", {"query": "sessions", "scope": "team-a"})
        mine = await client.call_tool("query_memory", {"query": "sessions", "scope": "team-b"})
    assert denied.is_error and tool_error(denied)["code"] == "scope_denied"
    assert [r["id"] for r in mine.structured_content["results"]] == [b]


async def test_score_is_the_cosine_and_matched_names_the_channels(stack: EchoStack) -> None:
    fid = await write(stack, fact("Deploys", "ArgoCD", "run through", "Deploys run through ArgoCD with sync waves."))
    result = await query(stack, query="ArgoCD sync waves")
    top = result["results"][0]
    assert top["id"] == fid
    assert set(top["matched"]) >= {"dense", "lexical"}
    expected = float(stack.embedder.embed_one("ArgoCD sync waves") @ stack.embedder.embed_one(
        "Deploys run through ArgoCD with sync waves."))
    assert math.isclose(top["score"], expected, abs_tol=2e-3)
    assert result["lexical"] == "bm25"


async def test_every_read_is_logged_with_its_results(stack: EchoStack) -> None:
    fid = await write(stack, fact("CI", "GitHub Actions", "runs on", "CI runs on GitHub Actions."))
    result = await query(stack, query="where does CI run")
    with psycopg.connect(stack.database_url) as conn:
        read = conn.execute("SELECT agent_id, query, tokens FROM reads WHERE id = %s", (result["read_id"],)).fetchone()
        rows = conn.execute("SELECT item_id::text, rank FROM read_results WHERE read_id = %s", (result["read_id"],)).fetchall()
    assert read == ("admin", "where does CI run", result["total_tokens"])
    assert (fid, 1) in rows


async def test_max_tokens_stops_adding_results(stack: EchoStack) -> None:
    for source, target in (("Orders", "Kafka"), ("Billing", "RabbitMQ"), ("Search", "SQS")):
        await write(stack, fact(source, target, "publishes to", f"{source} publishes its events to {target}."))
    result = await query(stack, query="which service publishes events", max_tokens=12)
    assert result["total_tokens"] <= 12
    assert "stopped at" in result["note"]
