"""query_memory searches with the text it was given but logs the query with each secret redacted.

As an agent's tool calls through the edge's argument handling (libs/testing/agents.py), on the
handler tier: the read log is read on the same rolled-back transaction.
"""

from __future__ import annotations

from echo_memory.libs.testing.agents import PAYMENTS, Agent, call
from echo_memory.libs.testing.rows import sql
from echo_memory.libs.testing.tiers import Handlers

# Built from parts so no file holds a literal a scanner would flag; the formats are real, the values fake.
STRIPE = "sk" + "_live_" + "Q8w2E4r6T8y0U2i4O6p8A0s2"
AWS = "AK" + "IA" + "Q7W2E5R8T1Y4U6I9"
FULLWIDTH_AWS = "".join(chr(ord(c) + 0xFEE0) for c in AWS)


async def test_the_read_log_holds_the_query_with_each_secret_redacted(handlers: Handlers) -> None:
    query = f"how are cards charged with {STRIPE} and {FULLWIDTH_AWS}?"
    client = Agent(handlers, "claude-code")
    _, written = await call(client, "write_episode", PAYMENTS)
    is_error, read = await call(client, "query_memory", {"query": query})
    assert not is_error
    assert written["edges_created"][0]["fact_id"] in [r["id"] for r in read["results"]]
    rows = await sql(handlers.conn, "SELECT query FROM reads WHERE id = %s", (read["read_id"],))
    assert rows == [("how are cards charged with [redacted Stripe key] and [redacted AWS access key]?",)]


async def test_a_query_without_secrets_is_logged_as_given(handlers: Handlers) -> None:
    client = Agent(handlers, "claude-code")
    await call(client, "write_episode", PAYMENTS)
    _, read = await call(client, "query_memory", {"query": "which vendor charges cards? (ＰＤＦ invoices)"})
    rows = await sql(handlers.conn, "SELECT query FROM reads WHERE id = %s", (read["read_id"],))
    assert rows == [("which vendor charges cards? (ＰＤＦ invoices)",)]
