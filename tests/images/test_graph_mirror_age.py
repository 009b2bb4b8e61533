"""The Apache AGE graph mirror, against the org database image (Postgres 17 + pgvector + AGE).

The whole system runs (EchoStack: every service, the HTTP edge, real NATS); the database is the
`make images` Postgres in a podman container with `age` installed. Writes through MCP reach the
mirror by the outbox → JetStream → reindex consumer path; the documented Cypher queries (two-hop
neighbourhood, causal path, a fact's versions) answer from it; `reindex` step `graph` rebuilds it.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from image_support import LOCKED_DOWN, PG_IMAGE, Containers, wait

from echo_memory.libs.local.stack import EchoStack
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.store.schema import apply_migrations

pytestmark = pytest.mark.images

MIRROR_WAIT = 60.0
EPISODE = {
    "scope": "shared",
    "entities": [
        {"name": "Checkout errors", "type": "incident"},
        {"name": "Database timeouts", "type": "symptom"},
        {"name": "Connection pool change", "type": "change"},
        {"name": "Billing API", "type": "service"},
        {"name": "Postgres", "type": "database"},
    ],
    "facts": [
        {"source": "Checkout errors", "target": "Database timeouts", "relation": "caused by",
         "fact": "The checkout errors were caused by database timeouts.", "confidence": "extracted",
         "causal_hint": "caused_by"},
        {"source": "Database timeouts", "target": "Connection pool change", "relation": "caused by",
         "fact": "The database timeouts were caused by the connection pool change.", "confidence": "extracted",
         "causal_hint": "caused_by"},
        {"source": "Billing API", "target": "Postgres", "relation": "stores invoices in",
         "fact": "The billing API stores its invoices in Postgres.", "confidence": "extracted"},
    ],
}
CHANGED = {
    "scope": "shared",
    "entities": [{"name": "Billing API", "type": "service"}, {"name": "Postgres", "type": "database"}],
    "facts": [{"source": "Billing API", "target": "Postgres", "relation": "stores invoices in",
               "fact": "The billing API stores its invoices in Postgres 17, in the billing schema.",
               "confidence": "extracted"}],
}
# The queries docs/architecture.md documents.
TWO_HOP = """SELECT * FROM ag_catalog.cypher('echo_memory', $$
  MATCH (a:Entity {name: 'Checkout errors'})-[:FACT*1..2]-(b:Entity) RETURN DISTINCT b.name
$$) AS (name ag_catalog.agtype)"""
CAUSAL_PATH = """SELECT * FROM ag_catalog.cypher('echo_memory', $$
  MATCH p = (a:Entity {name: 'Checkout errors'})-[:FACT*1..4 {causal: true, current: true}]->
            (b:Entity {name: 'Connection pool change'})
  UNWIND nodes(p) AS n RETURN n.name
$$) AS (name ag_catalog.agtype)"""
VERSIONS = """SELECT * FROM ag_catalog.cypher('echo_memory', $$
  MATCH (:Entity {name: 'Billing API'})-[r:FACT]->(:Entity {name: 'Postgres'})
  RETURN r.text, r.current, r.valid_from, r.valid_until ORDER BY r.valid_from
$$) AS (text ag_catalog.agtype, current ag_catalog.agtype, valid_from ag_catalog.agtype, valid_until ag_catalog.agtype)"""
EDGE_COUNT = """SELECT * FROM ag_catalog.cypher('echo_memory', $$
  MATCH ()-[r:FACT]->() RETURN count(r)
$$) AS (n ag_catalog.agtype)"""


@pytest.fixture(scope="module")
def age_database(images: None) -> Iterator[str]:
    """A migrated Echo Memory database with `age` installed, in the org database image (skipped without podman)."""
    containers = Containers()
    port, password = free_port(), secrets.token_urlsafe(18)
    try:
        containers.run("postgres", *LOCKED_DOWN, "--user", "26", "-e", f"PW={password}", PG_IMAGE, "sh", "-c",
                       'echo "$PW" > /tmp/pw && initdb -D /tmp/pg -U postgres --pwfile=/tmp/pw '
                       '--auth-host=scram-sha-256 --auth-local=trust -E UTF8 --locale=C >/dev/null && rm /tmp/pw '
                       f'&& exec postgres -D /tmp/pg -h 127.0.0.1 -p {port} -k /tmp -c fsync=off')
        admin = f"postgresql://postgres:{password}@127.0.0.1:{port}/postgres"
        wait("Postgres", lambda: psycopg.connect(admin, connect_timeout=2).close() is None, containers)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE echo_memory")
        url = f"postgresql://postgres:{password}@127.0.0.1:{port}/echo_memory"
        apply_migrations(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION age")
        yield url
    finally:
        containers.remove()


def _cypher(url: str, query: str) -> list[list[Any]]:
    with psycopg.connect(url) as conn:
        conn.execute("LOAD 'age'")
        conn.execute('SET search_path = ag_catalog, "$user", public')
        rows = conn.execute(query).fetchall()
        return [[None if value is None else json.loads(value) for value in row] for row in rows]


def _wait_for_edges(url: str, count: int) -> None:
    deadline = time.monotonic() + MIRROR_WAIT
    seen: Any = None
    while time.monotonic() < deadline:
        with psycopg.connect(url) as conn:
            graph = conn.execute("SELECT 1 FROM ag_catalog.ag_graph WHERE name = 'echo_memory'").fetchone()
        if graph is not None:
            seen = _cypher(url, EDGE_COUNT)[0][0]
            if seen == count:
                return
        time.sleep(0.5)
    raise AssertionError(f"the mirror holds {seen} FACT edges after {MIRROR_WAIT:.0f} s, expected {count}")


def _check_queries(url: str) -> None:
    assert {row[0] for row in _cypher(url, TWO_HOP)} == {"Database timeouts", "Connection pool change"}
    assert _cypher(url, CAUSAL_PATH) == [["Checkout errors"], ["Database timeouts"], ["Connection pool change"]]
    versions = _cypher(url, VERSIONS)
    assert [v[0] for v in versions] == [EPISODE["facts"][2]["fact"], CHANGED["facts"][0]["fact"]]  # type: ignore[index]
    (_, old_current, _, old_until), (_, new_current, new_from, new_until) = versions
    assert old_current is False and old_until is not None and new_current is True and new_until is None
    assert old_until <= new_from  # the old version ended when the new one began


async def test_fact_events_keep_the_mirror_in_sync_and_reindex_rebuilds_it(
    age_database: str, nats_url: str, embedder: MiniLM
) -> None:
    org = f"age-{uuid.uuid4().hex[:8]}"
    async with EchoStack(database_url=age_database, nats_url=nats_url, org=org, embedder=embedder) as stack:
        token = stack.issue_token("mirror-agent")
        async with stack.client(token) as mcp:
            first = await mcp.call_tool("write_episode", {**EPISODE, "session_id": "age-1"})
            assert not first.is_error, first.content
            # Blocking checks run in a thread: the services share this test's event loop.
            await asyncio.to_thread(_wait_for_edges, age_database, 3)
            second = await mcp.call_tool("write_episode", {**CHANGED, "session_id": "age-2"})
            assert not second.is_error, second.content
        await asyncio.to_thread(_wait_for_edges, age_database, 4)  # the superseded version stays, ended
        await asyncio.to_thread(_check_queries, age_database)

        # Lose the mirror; reindex's graph step writes it again from the tables.
        await asyncio.to_thread(_cypher, age_database, "SELECT * FROM ag_catalog.cypher('echo_memory', "
                                "$$ MATCH (n) DETACH DELETE n RETURN count(*) $$) AS (n ag_catalog.agtype)")
        assert await asyncio.to_thread(_cypher, age_database, EDGE_COUNT) == [[0]]
        rebuilt = await stack.admin_call("reindex", "reindex", {"step": "graph"})
        assert rebuilt["processed"] == 4 and rebuilt["total"] == 4 and rebuilt["skipped"] is None
        await asyncio.to_thread(_check_queries, age_database)


MARKED_TEXT = """SELECT * FROM ag_catalog.cypher('echo_memory', $$
  MATCH (a)-[r:FACT]->(b) WHERE r.text CONTAINS '{marker}' OR a.name CONTAINS '{marker}' OR b.name CONTAINS '{marker}'
  RETURN count(r)
$$) AS (n ag_catalog.agtype)"""
GRAPH_TABLES = """
SELECT format('SELECT properties FROM %I.%I', n.nspname, c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'echo_memory' AND c.relkind = 'r'
"""


def _marked_edges(url: str, marker: str) -> int | None:
    """FACT edges whose text or ends hold `marker`; None while the mirror's graph does not exist yet."""
    with psycopg.connect(url) as conn:
        if conn.execute("SELECT 1 FROM ag_catalog.ag_graph WHERE name = 'echo_memory'").fetchone() is None:
            return None
    return int(_cypher(url, MARKED_TEXT.format(marker=marker))[0][0])


def _rows_holding(url: str, marker: str) -> int:
    """Rows of the graph's own tables whose properties hold `marker`, read below Cypher."""
    with psycopg.connect(url) as conn:
        conn.execute("LOAD 'age'")
        conn.execute('SET search_path = ag_catalog, "$user", public')
        statements = [row[0] for row in conn.execute(GRAPH_TABLES).fetchall()]
        return sum(marker in str(row[0]) for statement in statements for row in conn.execute(statement).fetchall())


async def test_forget_takes_an_erased_entity_and_its_facts_out_of_the_mirror(
    age_database: str, nats_url: str, embedder: MiniLM
) -> None:
    marker = f"Kestrelwick{secrets.token_hex(4)}"
    org = f"age-{uuid.uuid4().hex[:8]}"
    episode = {"scope": "shared", "session_id": "age-forget",
               "entities": [{"name": f"{marker} Ltd", "type": "company"}, {"name": "Billing API", "type": "service"}],
               "facts": [{"source": "Billing API", "target": f"{marker} Ltd", "relation": "invoices",
                          "fact": f"The billing API invoices {marker} Ltd monthly.", "confidence": "extracted"}]}
    async with EchoStack(database_url=age_database, nats_url=nats_url, org=org, embedder=embedder) as stack:
        async with stack.client(stack.issue_token("mirror-agent")) as mcp:
            written = await mcp.call_tool("write_episode", episode)
            assert not written.is_error, written.content
        deadline = time.monotonic() + MIRROR_WAIT
        while await asyncio.to_thread(_marked_edges, age_database, marker) != 1:
            assert time.monotonic() < deadline, "the fact never reached the mirror"
            await asyncio.sleep(0.5)
        assert await asyncio.to_thread(_rows_holding, age_database, marker) > 0
        erased = await stack.admin_call("writes", "forget", {"entity": f"{marker} Ltd", "confirm": True,
                                                             "reason": "erasure request"})
        await stack.admin_call("writes", "forget_finish", {"erasure_id": erased["erasure_id"]})
        assert await asyncio.to_thread(_marked_edges, age_database, marker) == 0
        assert await asyncio.to_thread(_rows_holding, age_database, marker) == 0
