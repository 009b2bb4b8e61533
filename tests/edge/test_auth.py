"""Who may call the edge: missing, wrong, revoked and foreign-org tokens get 401; scopes are enforced typed."""

from __future__ import annotations

import asyncio
import uuid

import httpx2
import psycopg
from edge_support import extra_edge, mcp_client

from echo_memory.libs.local.stack import tool_error
from echo_memory.libs.server.orgs import register_org, unregister_org
from echo_memory.libs.server.store import admin
from echo_memory.libs.testing import EchoStack

INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

FACT = {
    "session_id": "s-auth",
    "entities": [{"name": "Billing API", "type": "service"}, {"name": "Postgres", "type": "database"}],
    "facts": [{
        "source": "Billing API", "target": "Postgres", "relation": "stores invoices in",
        "fact": "The billing API stores invoices in Postgres.", "confidence": "extracted",
    }],
}


async def _status(url: str, token: str | None) -> httpx2.Response:
    headers = dict(HEADERS)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}".strip()  # an empty token: the bare scheme
    async with httpx2.AsyncClient(timeout=10) as http:
        return await http.post(url, json=INIT, headers=headers)


async def test_missing_malformed_and_unknown_tokens_are_401_with_a_bearer_challenge(stack: EchoStack) -> None:
    valid = stack.issue_token("cursor")
    for token in (None, "not-a-token", f"em_{stack.org}_{uuid.uuid4().hex}", valid + "x", "em__x"):
        response = await _status(stack.url, token)
        assert response.status_code == 401, (token, response.status_code)
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert (await _status(stack.url, valid)).status_code == 200


async def test_an_empty_or_unexpanded_token_variable_is_401_saying_so(stack: EchoStack) -> None:
    for token, said in (("${ECHO_MEMORY_TOKEN}", "unexpanded placeholder '${ECHO_MEMORY_TOKEN}'"),
                        ("${env:ECHO_MEMORY_TOKEN}", "unexpanded placeholder"), ("", "the token is empty")):
        response = await _status(stack.url, token)
        assert response.status_code == 401, token
        assert said in response.json()["error_description"] and "ECHO_MEMORY_TOKEN" in response.json()["error_description"]
        assert response.headers["www-authenticate"].startswith('Bearer error="invalid_token"')


async def test_a_revoked_token_stops_working_within_the_cache_window(stack: EchoStack) -> None:
    async with extra_edge(stack, token_cache_seconds=0.3) as edge:
        token = stack.issue_token("codex")
        async with mcp_client(edge.url, token) as client:
            assert not (await client.call_tool("query_memory", {"query": "anything"})).is_error
        assert (await _status(edge.url, token)).status_code == 200

        revoked = await stack.admin_call("writes", "token_revoke", {"agent_id": "codex"})
        assert revoked["revoked"] == 1
        await asyncio.sleep(0.4)
        assert (await _status(edge.url, token)).status_code == 401
        other = stack.issue_token("cursor")  # revoking one agent leaves the others alone
        assert (await _status(edge.url, other)).status_code == 200


async def test_a_scope_the_token_does_not_grant_is_a_typed_error_naming_the_scope(stack: EchoStack) -> None:
    token = stack.issue_token("ci-bot", read=["solo"], write=["solo"])
    async with stack.client(token) as client:
        written = await client.call_tool("write_episode", {**FACT, "scope": "shared"})
        read = await client.call_tool("query_memory", {"query": "invoices", "scope": "shared"})
        own = await client.call_tool("write_episode", {**FACT, "scope": "solo"})
    assert written.is_error
    assert written.structured_content["stored"] is False
    assert tool_error(written)["code"] == "scope_denied"
    assert "'shared'" in tool_error(written)["message"]
    assert read.is_error and tool_error(read)["code"] == "scope_denied"
    assert "'shared'" in tool_error(read)["message"]
    assert not own.is_error and own.structured_content["stored"] is True


async def test_the_agent_id_on_a_fact_comes_from_the_token_not_the_arguments(stack: EchoStack) -> None:
    async with stack.client(stack.issue_token("cursor")) as client:
        spoofed = await client.call_tool("write_episode", {**FACT, "agent_id": "claude-code"})
        written = await client.call_tool("write_episode", FACT)
        recalled = await client.call_tool("query_memory", {"query": "where are invoices stored?"})
    assert spoofed.is_error and tool_error(spoofed)["code"] == "invalid_argument"
    assert "agent_id" in tool_error(spoofed)["message"]
    assert not written.is_error
    agents = {item["provenance"]["agent_id"] for item in recalled.structured_content["results"]}
    assert agents == {"cursor"}
    with psycopg.connect(stack.database_url) as conn:
        rows = conn.execute("SELECT DISTINCT agent_id FROM facts").fetchall()
    assert rows == [("cursor",)]


async def test_a_token_of_another_org_is_401_at_an_edge_that_does_not_serve_that_org(
    stack: EchoStack, pg, nats_url: str  # type: ignore[no-untyped-def]
) -> None:
    other_org = "t-" + uuid.uuid4().hex[:10]
    name = "o_" + uuid.uuid4().hex[:10]
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "echo_template"')
    other_url = pg.admin_url(name)
    await register_org(nats_url, other_org, other_url)
    try:
        foreign = admin.issue_token(other_url, org=other_org, agent_id="cursor",
                                    read_scopes=["shared"], write_scopes=["shared"])
        # The stack's edge serves only its own org: the foreign token is refused without a lookup.
        assert (await _status(stack.url, foreign)).status_code == 401
        # The same token is genuine: an edge that serves every registered org accepts it.
        async with extra_edge(stack, orgs=["*"]) as edge:
            assert (await _status(edge.url, foreign)).status_code == 200
            # A token of org A cannot be re-labelled as org B: its hash is unknown there.
            relabelled = foreign.replace(f"em_{other_org}_", f"em_{stack.org}_", 1)
            assert (await _status(edge.url, relabelled)).status_code == 401
    finally:
        await unregister_org(nats_url, other_org)
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
