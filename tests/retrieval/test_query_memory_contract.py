"""query_memory's contract: typed refusals, `about`, `as_of`, scopes, scores, the read log, `max_tokens`.

On the handler tier (the services' real routes on one rolled-back transaction); a refusal as an
agent's tool call through the edge's argument handling (libs/testing/agents.py). `as_of` across a
supersession needs two writes at their own times: every service's routes on the in-memory broker.
Two scopes that never leak stay on the full stack: there a token's grants, read by the real edge,
decide what the caller may read.
"""

from __future__ import annotations

import math
import time

import pytest

from echo_memory.libs.local.stack import tool_error
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import Agent, Answers, Routes
from echo_memory.libs.testing.rows import sql
from echo_memory.libs.testing.tiers import Handlers


def fact(source: str, target: str, relation: str, text: str, scope: str | None = None) -> dict:
    body = {
        "session_id": "s-1",
        "entities": [{"name": source, "type": "thing"}, {"name": target, "type": "thing"}],
        "facts": [{"source": source, "target": target, "relation": relation, "fact": text, "confidence": "extracted"}],
    }
    if scope:
        body["scope"] = scope
    return body


async def write(tier: Answers | EchoStack, body: dict) -> str:
    result = await tier.admin_call("writes", "write_episode", body)
    assert result["stored"], result
    return result["edges_created"][0]["fact_id"]


async def query(tier: Answers | EchoStack, **args: object) -> dict:
    return await tier.admin_call("retrieval", "query_memory", args)


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
async def test_bad_input_is_a_typed_error_never_clamped(handlers: Handlers, args: dict, fragment: str) -> None:
    result = await Agent(handlers, "cursor").call_tool("query_memory", args)
    assert result.is_error
    error = tool_error(result)
    assert error["code"] == "invalid_argument"
    assert fragment in error["message"]


async def test_about_is_exact_case_insensitive_never_substring(handlers: Handlers) -> None:
    await write(handlers, fact("Payments service", "Stripe", "charges through", "Payments charge cards through Stripe."))
    await write(handlers, fact("Auth service", "Postgres", "stores sessions in", "Auth stores sessions in Postgres."))
    exact = await query(handlers, query="card payments", about=["payments SERVICE"])
    assert [r["relation"] for r in exact["results"]] == ["charges through"]
    assert exact["results"][0]["matched"] == ["about"]
    substring = await query(handlers, query="card payments", about=["Payments"])
    assert substring["results"] == []
    assert "no entity is named 'Payments'" in substring["note"]
    pair = await query(handlers, about=["Stripe", "payments service"])
    assert len(pair["results"]) == 1
    unconnected = await query(handlers, about=["Stripe", "Postgres"])
    assert unconnected["results"] == []
    assert "'Stripe' and 'Postgres' are not connected" in unconnected["note"]


async def test_as_of_sees_the_store_as_it_was_across_supersession(routes: Routes) -> None:
    old = await write(routes, fact("Billing", "Razorpay", "uses provider", "Billing uses Razorpay for payments."))
    time.sleep(1.1)
    between = int(time.time())
    time.sleep(1.1)
    new = await write(routes, fact("Billing", "Razorpay", "uses provider", "Billing moved off Razorpay to Stripe."))
    now = await query(routes, query="which payment provider does billing use", include_episodes=False)
    assert [r["id"] for r in now["results"]] == [new]
    then = await query(routes, query="which payment provider does billing use", as_of=between, include_episodes=False)
    assert [r["id"] for r in then["results"]] == [old]
    assert then["results"][0]["provenance"]["valid_until"] is not None
    before = await query(routes, query="which payment provider does billing use", as_of=between - 100)
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


async def test_score_is_the_cosine_and_matched_names_the_channels(handlers: Handlers, embedder: MiniLM) -> None:
    fid = await write(handlers, fact("Deploys", "ArgoCD", "run through", "Deploys run through ArgoCD with sync waves."))
    result = await query(handlers, query="ArgoCD sync waves")
    top = result["results"][0]
    assert top["id"] == fid
    assert set(top["matched"]) >= {"dense", "lexical"}
    expected = float(embedder.embed_one("ArgoCD sync waves") @ embedder.embed_one(
        "Deploys run through ArgoCD with sync waves."))
    assert math.isclose(top["score"], expected, abs_tol=2e-3)
    assert result["lexical"] == "bm25"


async def test_every_read_is_logged_with_its_results(handlers: Handlers) -> None:
    fid = await write(handlers, fact("CI", "GitHub Actions", "runs on", "CI runs on GitHub Actions."))
    result = await query(handlers, query="where does CI run")
    [read] = await sql(handlers.conn, "SELECT agent_id, query, tokens FROM reads WHERE id = %s", (result["read_id"],))
    rows = await sql(handlers.conn, "SELECT item_id::text, rank FROM read_results WHERE read_id = %s", (result["read_id"],))
    assert read == ("admin", "where does CI run", result["total_tokens"])
    assert (fid, 1) in rows


async def test_max_tokens_stops_adding_results(handlers: Handlers) -> None:
    for source, target in (("Orders", "Kafka"), ("Billing", "RabbitMQ"), ("Search", "SQS")):
        await write(handlers, fact(source, target, "publishes to", f"{source} publishes its events to {target}."))
    result = await query(handlers, query="which service publishes events", max_tokens=12)
    assert result["total_tokens"] <= 12
    assert "stopped at" in result["note"]
