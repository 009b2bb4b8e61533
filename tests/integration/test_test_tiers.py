"""The faster test tiers (libs/testing/tiers.py) answer as the full stack does, and leave nothing behind."""

from __future__ import annotations

import psycopg
import pytest
from pydantic import SecretStr

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.errors import Conflict, InvalidArgument, NotFound
from echo_memory.libs.core.contracts.query import QueryMemoryInput
from echo_memory.libs.core.contracts.verbs import QUERY_MEMORY
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.store import access
from echo_memory.libs.testing.tiers import Handlers, rolled_back, routed

EPISODE = {
    "session_id": "s-tier",
    "entities": [{"name": "Billing API", "type": "service"}, {"name": "Postgres", "type": "database"}],
    "facts": [{"source": "Billing API", "target": "Postgres", "relation": "stores invoices in",
               "fact": "The billing API stores invoices in Postgres.", "confidence": "extracted"}],
}


async def _facts(handlers: Handlers) -> int:
    row = await (await handlers.conn.execute("SELECT count(*) FROM facts")).fetchone()
    assert row is not None
    return int(row[0])


async def test_a_failed_call_rolls_back_only_itself(handlers: Handlers) -> None:
    await handlers.conn.execute(
        "CREATE FUNCTION tier_deadlock() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '40P01'; END $$"
    )
    await handlers.conn.execute("CREATE TRIGGER tier_inject BEFORE INSERT ON facts FOR EACH ROW EXECUTE FUNCTION tier_deadlock()")
    with pytest.raises(Conflict) as caught:  # the same error seam as over the bus
        await handlers.admin_call("writes", "write_episode", EPISODE)
    assert caught.value.retryable
    await handlers.conn.execute("DROP TRIGGER tier_inject ON facts")
    stored = await handlers.admin_call("writes", "write_episode", EPISODE)  # the connection is still usable
    assert stored["stored"] and len(stored["edges_created"]) == 1
    assert await _facts(handlers) == 1
    found = await handlers.admin_call("retrieval", "query_memory", {"query": "where are invoices kept?"})
    assert found["results"][0]["text"] == EPISODE["facts"][0]["fact"]
    typed = await handlers.call_verb(access.admin_caller(handlers.org), QUERY_MEMORY,
                                     QueryMemoryInput(query="where are invoices kept?"))
    assert typed.results[0].text == EPISODE["facts"][0]["fact"]


async def test_arguments_are_parsed_and_refused_as_over_the_bus(handlers: Handlers) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await handlers.admin_call("retrieval", "query_memory", {"query": "x", "top_k": 5000})
    assert "top_k" in caught.value.message
    other_org = access.admin_caller("another-org")
    with pytest.raises(InvalidArgument):
        await handlers.call(other_org, "retrieval", "query_memory", {"query": "x"})


async def test_the_outer_transaction_leaves_nothing_behind(tier_database_url: str, org: str, embedder: MiniLM) -> None:
    async with rolled_back(tier_database_url) as conn:
        await Handlers(conn, org, embedder).admin_call("writes", "write_episode", EPISODE)
    with psycopg.connect(tier_database_url) as check:
        row = check.execute("SELECT count(*) FROM facts WHERE text = %s", (EPISODE["facts"][0]["fact"],)).fetchone()
    assert row == (0,)


async def test_routes_on_the_in_memory_broker_answer_typed(database_url: str, org: str, embedder: MiniLM) -> None:
    settings = Settings(org=org)
    async with routed("retrieval", settings, embedder=embedder, database_url=database_url) as bus:
        admin = access.admin_caller(org)
        with pytest.raises(InvalidArgument):
            await bus.call_by_name(caller=admin, service="retrieval", verb="query_memory", args={"top_k": 1}, timeout=10)
        empty = await bus.call(QUERY_MEMORY, QueryMemoryInput(query="x"), caller=admin, timeout=30)
        assert empty.results == []
        with pytest.raises(NotFound):  # a subject for an org this deployment does not serve
            await bus.call_by_name(caller=access.admin_caller("t-unknown"), service="retrieval", verb="query_memory",
                           args={"query": "x"}, timeout=10)
    assert settings.database_url is None or isinstance(settings.database_url, SecretStr)
