"""Each scope's full-dump size, kept by triggers as facts are written, superseded and erased.

Handler tier: the writes and audit routes on one rolled-back transaction. After every step the
kept totals equal a sum over the facts computed from scratch.
"""

from __future__ import annotations

from typing import Any

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.server.store.fact_tokens import full_dump_tokens
from echo_memory.libs.testing.tiers import Handlers

KEPT = "SELECT s.name, t.active_tokens FROM fact_token_totals t JOIN scopes s ON s.id = t.scope_id"
RECOMPUTED = """
SELECT s.name, sum(f.token_count) FROM facts f JOIN scopes s ON s.id = f.scope_id
WHERE f.t_invalid IS NULL GROUP BY s.name
"""
SOLO = "solo:claude-code"


def writer(org: str) -> Caller:
    return Caller(org=org, agent_id="claude-code", read_scopes=["*"], write_scopes=["*"], tool="pytest")


def episode(text: str, scope: str = "shared") -> dict[str, Any]:
    return {"scope": scope, "session_id": "s-1",
            "entities": [{"name": "Billing API", "type": "service"}, {"name": "Postgres", "type": "database"}],
            "facts": [{"source": "Billing API", "target": "Postgres", "relation": "stores data in", "fact": text,
                       "confidence": "extracted"}]}


async def totals(handlers: Handlers, query: str) -> dict[str, int]:
    rows = await (await handlers.conn.execute(query)).fetchall()
    return {r[0]: int(r[1]) for r in rows if int(r[1]) != 0}


async def assert_exact(handlers: Handlers) -> dict[str, int]:
    kept = await totals(handlers, KEPT)
    assert kept == await totals(handlers, RECOMPUTED)
    return kept


async def test_writes_supersessions_and_erasures_keep_the_total_exact(handlers: Handlers) -> None:
    who = writer(handlers.org)
    first = await handlers.call(who, "writes", "write_episode", episode("The billing API stores data in Postgres."))
    await handlers.call(who, "writes", "write_episode", episode("My notebook lists the on-call rota.", "solo"))
    after_writes = await assert_exact(handlers)
    assert set(after_writes) >= {"shared", SOLO}

    # Same claim, new text: the first version is invalidated, only the second counts.
    second = await handlers.call(who, "writes", "write_episode", episode(
        "The billing API stores invoices and ledgers in Postgres 16 since the spring migration."))
    assert second["edges_created"][0]["supersedes"] == first["edges_created"][0]["fact_id"]
    after_supersession = await assert_exact(handlers)
    assert after_supersession["shared"] > after_writes["shared"]
    assert after_supersession[SOLO] == after_writes[SOLO]

    await handlers.admin_call("writes", "forget", {"fact_id": second["edges_created"][0]["fact_id"], "confirm": True,
                                                   "reason": "test", "ref": "T-1", "by": "dpo"})
    after_erasure = await assert_exact(handlers)
    assert "shared" not in after_erasure  # both versions erased: nothing of the scope is left to dump

    names = [r[0] for r in await (await handlers.conn.execute("SELECT name FROM scopes")).fetchall()]
    assert await full_dump_tokens(handlers.conn, names) == sum(after_erasure.values())
    assert await full_dump_tokens(handlers.conn, ["no-such-scope"]) == 0
    cost = await handlers.admin_call("audit", "recall_cost", {"scope": ["shared"]})
    assert cost["full_dump_tokens"] == 0 and after_erasure[SOLO] > 0


async def test_an_update_that_changes_no_current_tokens_leaves_the_total_row_alone(handlers: Handlers) -> None:
    who = writer(handlers.org)
    await handlers.call(who, "writes", "write_episode", episode("The billing API stores data in Postgres."))
    version = "SELECT t.xmin::text FROM fact_token_totals t JOIN scopes s ON s.id = t.scope_id WHERE s.name = 'shared'"
    before = await (await handlers.conn.execute(version)).fetchone()
    await handlers.conn.execute("SAVEPOINT bulk")  # a new subtransaction: a row it rewrites gets a new xmin
    await handlers.conn.execute("UPDATE facts SET written_at = written_at - interval '1 day', token_count = token_count")
    assert await (await handlers.conn.execute(version)).fetchone() == before
    await handlers.conn.execute("UPDATE facts SET token_count = token_count + 5")
    assert await (await handlers.conn.execute(version)).fetchone() != before
    await assert_exact(handlers)
