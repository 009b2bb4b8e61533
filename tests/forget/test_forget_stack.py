"""`forget` end to end: real MCP writes, the outbox relay's JetStream stream, the CLI, VACUUM, export and restore.

Every process runs as its own user on an authenticated nats-server (the supervisor's own config), so
the writes service's permission to read and delete the stream's messages is the one it ships with.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import psycopg
import pytest
from forget_helpers import episode, fact, marker_hits, new_marker

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.subjects import EVENTS_STREAM
from echo_memory.libs.local.cli.audit_commands import admin_session, export_to, import_lines
from echo_memory.libs.local.supervisor.bus_auth import (
    credentials_file,
    ensure_credentials,
    server_config,
    write_server_config,
)
from echo_memory.libs.local.supervisor.nats import NatsServer
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.server.bus.auth import connect_options, read_credentials
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing import EchoStack

ROOT = Path(__file__).parents[2]
# Every live tuple on every heap page of the table that holds the marker's bytes (pageinspect).
RAW_HITS = """
SELECT count(*) FROM generate_series(0, (pg_relation_size(%(table)s::regclass) / 8192)::int - 1) AS b,
     heap_page_items(get_raw_page(%(table)s::text, b)) AS i
WHERE i.t_data IS NOT NULL AND position(convert_to(%(marker)s, 'UTF8') IN i.t_data) > 0
"""
PG_STATS_HITS = """
SELECT count(*) FROM pg_stats
WHERE schemaname = 'public' AND strpos(coalesce(most_common_vals::text, '') || coalesce(histogram_bounds::text, ''),
                                        %s) > 0
"""


@pytest.fixture
def bus_home(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    home = tmp_path / "home"
    users = ensure_credentials(home)
    port = free_port()
    path = home / "nats" / "nats.conf"
    write_server_config(path, server_config(port, home / "nats", users))
    server = NatsServer(home / "nats", port, config=path)
    server.start()
    try:
        yield home, server.url
    finally:
        server.stop()


@pytest.fixture
async def secured(bus_home: tuple[Path, str], database_url: str, org: str, embedder: MiniLM) -> AsyncIterator[EchoStack]:
    home, url = bus_home
    files = {user: credentials_file(home, user) for user in ("writes", "retrieval", "causal", "audit", "reindex",
                                                              "consolidation", "edge", "admin")}
    async with EchoStack(database_url=database_url, nats_url=url, org=org, embedder=embedder,
                         bus_credentials=files) as running:
        yield running


def admin_settings(stack: EchoStack, home: Path) -> Settings:
    return Settings(org=stack.org, nats_url=stack.nats_url, nats_credentials=credentials_file(home, "admin"))


async def cli(stack: EchoStack, home: Path, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "ECHO_MEMORY_NATS_URL": stack.nats_url, "ECHO_MEMORY_ORG": stack.org,
           "ECHO_MEMORY_NATS_CREDENTIALS": str(credentials_file(home, "admin"))}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "echo_memory.libs.local.cli", *args, env=env,
                                                cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def stream_messages(stack: EchoStack, home: Path | None) -> list[bytes]:
    """Every message ECHO_EVENTS holds (as the admin user on the authenticated bus), sequence by sequence."""
    credentials = read_credentials(credentials_file(home, "admin")) if home is not None else None
    nc = await nats.connect(stack.nats_url, **connect_options(credentials))
    try:
        js = nc.jetstream()
        info = await js.stream_info(EVENTS_STREAM)
        found = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                found.append((await js.get_msg(EVENTS_STREAM, seq=seq)).data or b"")
            except nats.js.errors.NotFoundError:
                continue  # deleted
        return found
    finally:
        await nc.close()


async def wait_for_events(stack: EchoStack, home: Path | None, fact_ids: list[str]) -> None:
    for _ in range(100):
        data = b"\n".join(await stream_messages(stack, home))
        if all(f.encode() in data for f in fact_ids):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"the relay never published events for {fact_ids}")


async def export_text(settings: Settings, scope: str | None = None) -> str:
    out = io.StringIO()
    async with admin_session(settings) as call:
        await export_to(call, out, scope=scope, progress=None, timeout=30)
    return out.getvalue()


async def write(stack: EchoStack, token: str, args: dict[str, Any]) -> dict[str, Any]:
    async with stack.client(token) as client:
        result = await client.call_tool("write_episode", args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


async def test_erasure_reaches_the_stream_old_tuples_statistics_and_exports(
    secured: EchoStack, bus_home: tuple[Path, str]
) -> None:
    stack, (home, _) = secured, bus_home
    marker = new_marker()
    token = stack.issue_token("claude-code")
    entities = [("Dana Whitlock", "person"), ("Home address", "place")]
    first = await write(stack, token, episode(entities, [fact("Dana Whitlock", "Home address", "lives at",
                                                              f"Dana Whitlock lives at {marker} Harbour Road.")]))
    second = await write(stack, token, episode(entities, [fact("Dana Whitlock", "Home address", "lives at",
                                                               f"Dana Whitlock moved to {marker} Quay Street.")]))
    other = await write(stack, token, episode([("Billing API", "service"), ("Postgres", "database")], [
        fact("Billing API", "Postgres", "stores data in", "The billing API stores data in Postgres.")]))
    erased = [first["edges_created"][0]["fact_id"], second["edges_created"][0]["fact_id"]]
    kept = other["edges_created"][0]["fact_id"]
    await wait_for_events(stack, home, [*erased, kept])
    settings = admin_settings(stack, home)
    before_export = await export_text(settings, scope="shared")
    assert marker in before_export
    async with await psycopg.AsyncConnection.connect(stack.database_url, autocommit=True) as conn:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        await conn.execute("ANALYZE")  # the planner's statistics now hold sample values, the marker among them
        assert (await (await conn.execute(PG_STATS_HITS, (marker,))).fetchone())[0] > 0  # type: ignore[index]

    # The dry run over the CLI names both versions and changes nothing.
    code, out, err = await cli(stack, home, "forget", "--fact", erased[1], "--json")
    assert code == 0, err
    dry = json.loads(out)["forget"]
    assert dry["dry_run"] and sorted(dry["ids"]["facts"]) == sorted(erased)
    async with await psycopg.AsyncConnection.connect(stack.database_url, autocommit=True) as conn:
        assert await marker_hits(conn, marker)

    done = await stack.admin_call("writes", "forget", {"fact_id": erased[0], "confirm": True,
                                                       "reason": "deletion request", "ref": "DSR-9", "by": "dpo"})
    async with await psycopg.AsyncConnection.connect(stack.database_url, autocommit=True) as conn:
        assert await marker_hits(conn, marker) == {}
        # Committed, not yet vacuumed: the dead tuples still hold the bytes (so the check below can fail).
        assert (await (await conn.execute(RAW_HITS, {"table": "facts", "marker": marker})).fetchone())[0] > 0  # type: ignore[index]
    finished = await stack.admin_call("writes", "forget_finish", {"erasure_id": done["erasure_id"]})
    assert finished["events_deleted"] >= 2 and "facts" in finished["vacuumed"]

    async with await psycopg.AsyncConnection.connect(stack.database_url, autocommit=True) as conn:
        for table in finished["vacuumed"]:
            row = await (await conn.execute(RAW_HITS, {"table": table, "marker": marker})).fetchone()
            assert row == (0,), table
        assert (await (await conn.execute(PG_STATS_HITS, (marker,))).fetchone()) == (0,)
    messages = await stream_messages(stack, home)
    assert not [m for m in messages if any(f.encode() in m for f in erased) or marker.encode() in m]
    assert any(kept.encode() in m for m in messages)  # the scan did read the stream

    after_export = await export_text(settings)
    assert marker not in after_export
    records = [json.loads(line) for line in after_export.splitlines()]
    # Only the tombstones still name the erased ids (content-free); no record of the facts is left.
    assert not [r for r in records if r.get("type") != "audit" and any(f in json.dumps(r) for f in erased)]
    assert [r for r in records if r.get("type") == "audit" and (r.get("after") or {}).get("erasure_id")]
    assert "The billing API stores data in Postgres." in after_export

    # Restoring the export taken before the erasure (into a new scope) does not bring it back.
    async with admin_session(settings) as call:
        restored = await import_lines(call, [json.loads(line) for line in before_export.splitlines()],
                                      scope="restored", progress=None, timeout=60)
    assert restored.erased_skipped >= 2 and restored.erased_redacted >= 2
    async with await psycopg.AsyncConnection.connect(stack.database_url, autocommit=True) as conn:
        assert await marker_hits(conn, marker) == {}
        texts = await (await conn.execute(
            "SELECT f.text FROM facts f JOIN scopes s ON s.id = f.scope_id WHERE s.name = 'restored'")).fetchall()
        assert texts == [("The billing API stores data in Postgres.",)]

    code, out, err = await cli(stack, home, "forget", "--log")
    assert code == 0, err
    assert done["erasure_id"] in out and "DSR-9" in out and "dpo" in out and marker not in out
    assert "not finished" not in out


async def test_restore_of_an_export_taken_before_a_scope_erasure_brings_nothing_back(stack: EchoStack) -> None:
    marker = new_marker()
    await stack.admin_call("writes", "scope_create", {"name": "team-x"})
    token = stack.issue_token("claude-code", read=["shared", "team-x"], write=["shared", "team-x"])
    written = await write(stack, token, episode([("Vault", "service"), ("Runbook", "document")], [
        fact("Vault", "Runbook", "is described in", f"Vault is described in runbook {marker} of team X.")], scope="team-x"))
    await wait_for_events(stack, None, [written["edges_created"][0]["fact_id"]])
    await stack.admin_call("writes", "import_episodes", {"scope": "team-x", "episodes": [
        {"content": f"the vault runbook is {marker} of team X", "session_id": "x", "seq": 0}]})
    settings = Settings(org=stack.org, nats_url=stack.nats_url)
    before = await export_text(settings, scope="team-x")
    assert marker in before

    code, out, err = await cli_open(stack, "forget", "--scope", "team-x", "--confirm", "--reason", "team dissolved",
                                    "--ref", "OPS-4")
    assert code == 0, err
    assert "erased (erasure" in out and "vacuumed" in out
    async with await psycopg.AsyncConnection.connect(stack.database_url, autocommit=True) as conn:
        assert await marker_hits(conn, marker) == {}
        team = await (await conn.execute("SELECT id::text FROM scopes WHERE name = 'team-x'")).fetchone()
    assert team is not None
    # Every event of the erased scope is gone from the stream.
    assert not [m for m in await stream_messages(stack, None) if team[0].encode() in m]

    async with admin_session(settings) as call:
        result = await import_lines(call, [json.loads(line) for line in before.splitlines()], scope="team-x-restored",
                                    progress=None, timeout=60)
    # Nothing of the scope but its tombstoned audit trail comes back, and no byte of the marker.
    assert result.erased_skipped >= 5 and result.erased_redacted >= 3
    assert (result.counts["fact"], result.counts["episode"], result.counts["entity"]) == (0, 0, 0)
    async with await psycopg.AsyncConnection.connect(stack.database_url, autocommit=True) as conn:
        assert await marker_hits(conn, marker) == {}
        restored = await (await conn.execute(
            "SELECT count(*) FROM audit_log a JOIN scopes s ON s.id = a.scope_id WHERE s.name = 'team-x-restored'"
        )).fetchone()
        assert restored is not None and restored[0] >= 3

    # Bad input over the CLI: one line naming the typed error, exit 1, nothing changed.
    code, out, err = await cli_open(stack, "forget", "--fact", "00000000-0000-0000-0000-000000000000",
                                    "--confirm", "--reason", "r")
    assert code == 1 and "not_found" in err, (out, err)
    code, out, err = await cli_open(stack, "forget", "--entity", "", "--confirm", "--reason", "r")
    assert code == 1 and "invalid_argument" in err, (out, err)


async def cli_open(stack: EchoStack, *args: str) -> tuple[int, str, str]:
    """The CLI on the open test bus (no credentials)."""
    env = {**os.environ, "ECHO_MEMORY_NATS_URL": stack.nats_url, "ECHO_MEMORY_ORG": stack.org}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "echo_memory.libs.local.cli", *args, env=env,
                                                cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()
