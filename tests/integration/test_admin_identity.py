"""One admin identity for every admin-only verb, whichever service answers it (real NATS, real Postgres)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.server.bus.broker import make_broker
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.libs.server.store import tokens
from echo_memory.libs.testing import EchoStack

IMPORT_ID = "6f1d2c3b-0000-4000-8000-000000000003"
# Every admin-only verb with arguments that succeed for the admin.
ADMIN_VERBS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("writes", "token_list", {}),
    ("writes", "token_create", {"agent_id": "new-bot"}),
    ("writes", "token_revoke", {"agent_id": "new-bot"}),
    ("writes", "scope_create", {"name": "team-z"}),
    ("writes", "scope_list", {}),
    ("writes", "scope_show", {"name": "team-z"}),
    ("writes", "scope_delete", {"name": "team-z"}),
    ("audit", "export", {}),
    ("audit", "import_stage", {"import_id": IMPORT_ID, "first_line": 0, "lines": [{"type": "header"}]}),
    ("audit", "health", {}),
    ("writes", "unhinted_facts", {}),
    ("writes", "add_causal_hints", {"session_id": "s-1", "hints": [
        {"fact_id": "00000000-0000-4000-8000-000000000001", "causal_hint": "caused_by", "quote": "because of x"}]}),
    ("writes", "clear_post_hoc", {"agent": "echo-distil"}),
    ("writes", "entity_deferred", {}),
)
NOT_ADMINS = (
    Caller(org="", agent_id="ci-bot", read_scopes=["*"], write_scopes=["*"]),
    Caller(org="", agent_id="admin", read_scopes=["shared", "solo"], write_scopes=["shared", "solo"]),
)


@pytest.fixture
async def bus(stack: EchoStack) -> AsyncIterator[BusClient]:
    broker = make_broker(stack.nats_url)
    await broker.start()
    try:
        yield BusClient(broker)
    finally:
        await broker.stop()


@pytest.mark.parametrize("who", NOT_ADMINS, ids=lambda c: f"{c.agent_id}-{','.join(c.read_scopes)}")
async def test_writes_and_audit_give_the_same_answer_to_a_non_admin(
    stack: EchoStack, bus: BusClient, who: Caller
) -> None:
    with psycopg.connect(stack.database_url) as conn:
        before = conn.execute("SELECT (SELECT count(*) FROM tokens), (SELECT count(*) FROM scopes)").fetchone()
    for service, verb, args in ADMIN_VERBS:
        with pytest.raises(EchoError) as caught:
            await bus.call_by_name(caller=who.model_copy(update={"org": stack.org}), service=service, verb=verb,
                           args=args, timeout=10)
        assert caught.value.code == "scope_denied", (service, verb)
        assert f"agent '{who.agent_id}' may not" in caught.value.message, (service, verb)
    with psycopg.connect(stack.database_url) as conn:
        assert conn.execute("SELECT (SELECT count(*) FROM tokens), (SELECT count(*) FROM scopes)").fetchone() == before


async def test_the_admin_identity_may_call_every_admin_verb(stack: EchoStack) -> None:
    for service, verb, args in ADMIN_VERBS:
        assert isinstance(await stack.admin_call(service, verb, args), dict), (service, verb)


async def test_a_token_row_for_the_admin_agent_never_verifies(stack: EchoStack) -> None:
    # Written straight into the table, as no issuing path will: the edge must still refuse it.
    token = tokens.mint(stack.org)
    with psycopg.connect(stack.database_url) as conn:
        conn.execute(tokens.UPSERT_AGENT, ("admin",))
        conn.execute(tokens.INSERT_TOKEN, (tokens.hash_token(token), tokens.display_prefix(token), "admin", ["*"], ["*"]))
    assert await stack.admin_call("writes", "token_verify", {"token_hash": tokens.hash_token(token)}) == {
        "valid": False, "agent_id": None, "token_id": None, "read_scopes": [], "write_scopes": [],
    }
    with pytest.raises(EchoError) as caught:
        await stack.admin_call("writes", "token_create", {"agent_id": "admin"})
    assert caught.value.code == "invalid_argument" and "reserved" in caught.value.message
