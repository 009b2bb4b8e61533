"""echo_memory.libs.server.store.access on the real database, each test inside a transaction that is rolled back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound, ScopeDenied
from echo_memory.libs.server.store import access, admin, tokens

COUNT_TOKENS_AND_AGENTS = "SELECT (SELECT count(*) FROM tokens), (SELECT count(*) FROM agents)"
SCOPE_ROW = "SELECT kind, description, readers, writers, retention_days FROM scopes WHERE name = %s"


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[psycopg.AsyncConnection]:
    async with await psycopg.AsyncConnection.connect(database_url) as connection, \
            connection.transaction(force_rollback=True):
        yield connection


@pytest.fixture
def sync_conn(database_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(database_url) as connection, connection.transaction(force_rollback=True):
        yield connection


def caller(agent: str, read: list[str], write: list[str] | None = None) -> Caller:
    return Caller(org="o", agent_id=agent, read_scopes=read, write_scopes=read if write is None else write)


# ---- the admin identity ------------------------------------------------------------------------

@pytest.mark.parametrize(("who", "admin_expected"), [
    (access.admin_caller("o"), True),
    (caller("ci-bot", ["*"]), False),  # every scope granted is not enough
    (caller("admin", ["shared", "solo"]), False),  # the name alone is not enough
    (caller("admin", ["*"], ["shared"]), False),
    (caller("admin", ["shared"], ["*"]), False),
])
def test_the_admin_is_agent_admin_granted_every_scope(who: Caller, admin_expected: bool) -> None:
    assert access.is_admin(who) is admin_expected
    if admin_expected:
        access.require_admin(who, "export")
    else:
        with pytest.raises(ScopeDenied, match=f"agent '{who.agent_id}' may not export"):
            access.require_admin(who, "export")


async def test_no_token_can_be_issued_for_the_admin_identity(
    conn: psycopg.AsyncConnection, sync_conn: psycopg.Connection
) -> None:
    before = await (await conn.execute(COUNT_TOKENS_AND_AGENTS)).fetchone()
    for agent, message in (("admin", "reserved"), ("", "must be letters"), ("bad agent", "must be letters")):
        with pytest.raises(InvalidArgument, match=message):
            await access.issue_token_async(conn, org="o", agent_id=agent, read_scopes=["*"], write_scopes=["*"])
        with pytest.raises(InvalidArgument, match=message):
            access.issue_token(sync_conn, org="o", agent_id=agent, read_scopes=["*"], write_scopes=["*"])
    assert await (await conn.execute(COUNT_TOKENS_AND_AGENTS)).fetchone() == before
    assert sync_conn.execute(COUNT_TOKENS_AND_AGENTS).fetchone() == before


# ---- issuing tokens ----------------------------------------------------------------------------

async def test_an_issued_token_is_stored_only_as_its_hash_and_verifies(conn: psycopg.AsyncConnection) -> None:
    issued = await access.issue_token_async(conn, org="o", agent_id="cursor", read_scopes=["shared"], write_scopes=[])
    assert issued.agent_id == "cursor" and tokens.org_of(issued.token) == "o"
    row = await (await conn.execute(tokens.VERIFY_TOKEN, (tokens.hash_token(issued.token),))).fetchone()
    assert row is not None and row[:3] == ("cursor", ["shared"], []) and str(row[3]) == str(issued.token_id)
    stored = await (await conn.execute("SELECT token_hash, prefix FROM tokens WHERE id = %s", (issued.token_id,))).fetchone()
    assert stored == (tokens.hash_token(issued.token), tokens.display_prefix(issued.token))


def test_the_sync_path_stores_the_same_row(sync_conn: psycopg.Connection) -> None:
    issued = access.issue_token(sync_conn, org="o", agent_id="codex", read_scopes=["*"], write_scopes=["shared"])
    row = sync_conn.execute(tokens.VERIFY_TOKEN, (tokens.hash_token(issued.token),)).fetchone()
    assert row is not None and row[:3] == ("codex", ["*"], ["shared"]) and str(row[3]) == str(issued.token_id)
    assert sync_conn.execute("SELECT id FROM agents WHERE id = 'codex'").fetchone() == ("codex",)


# ---- creating named scopes ---------------------------------------------------------------------

async def test_creating_a_scope_twice_leaves_it_and_replacing_updates_it(conn: psycopg.AsyncConnection) -> None:
    assert await access.save_scope_async(conn, name="team-a", description="first") is True
    assert await access.save_scope_async(conn, name="team-a", description="second", readers=["cursor"]) is False
    assert await (await conn.execute(SCOPE_ROW, ("team-a",))).fetchone() == ("named", "first", ["*"], ["*"], None)
    created = await access.save_scope_async(conn, name="team-a", description="third", readers=["cursor"],
                                            writers=[], retention_days=30, replace=True)
    assert created is False
    assert await (await conn.execute(SCOPE_ROW, ("team-a",))).fetchone() == ("named", "third", ["cursor"], ["*"], 30)


def test_the_sync_path_creates_the_same_row(sync_conn: psycopg.Connection) -> None:
    assert access.save_scope(sync_conn, name="ops.prod", readers=["ci-bot"], replace=True) is True
    assert sync_conn.execute(SCOPE_ROW, ("ops.prod",)).fetchone() == ("named", "", ["ci-bot"], ["*"], None)


@pytest.mark.parametrize(("name", "retention", "message"), [
    ("shared", None, "built-in"), ("solo", None, "built-in"), ("solo:cursor", None, "built-in"),
    ("Team A", None, "lowercase"), ("", None, "lowercase"), ("team-a", 0, "retention_days"),
])
async def test_builtin_and_malformed_scopes_are_refused_on_both_paths(
    conn: psycopg.AsyncConnection, sync_conn: psycopg.Connection, name: str, retention: int | None, message: str
) -> None:
    before = await (await conn.execute(SCOPE_ROW, ("shared",))).fetchone()
    with pytest.raises(InvalidArgument, match=message):
        await access.save_scope_async(conn, name=name, retention_days=retention, replace=True)
    with pytest.raises(InvalidArgument, match=message):
        access.save_scope(sync_conn, name=name, retention_days=retention, replace=True)
    assert await (await conn.execute(SCOPE_ROW, ("shared",))).fetchone() == before
    assert await (await conn.execute("SELECT count(*) FROM scopes")).fetchone() == (1,)


def test_the_url_helper_refuses_builtin_scopes_with_a_typed_error(database_url: str) -> None:
    with pytest.raises(InvalidArgument, match="built-in"):
        admin.ensure_scope(database_url, name="shared")
    with pytest.raises(InvalidArgument, match="reserved"):
        admin.issue_token(database_url, org="o", agent_id="admin", read_scopes=["*"], write_scopes=["*"])


# ---- who may read or write a scope -------------------------------------------------------------

AGENTS = {
    "cursor": (["shared", "solo", "team-a", "locked"], ["shared", "solo", "team-a"]),
    "codex": (["shared", "solo"], ["shared", "solo"]),
    "ci-bot": (["*"], ["*"]),
    "reader": (["*"], []),
}


async def _world(conn: psycopg.AsyncConnection) -> None:
    await access.save_scope_async(conn, name="team-a")
    await access.save_scope_async(conn, name="locked", readers=["codex"], writers=["codex"])
    await access.save_scope_async(conn, name="bots", readers=["ci-bot", "reader"], writers=["ci-bot"])
    for agent in ("cursor", "codex"):  # a first write creates each agent's solo row
        await access.resolve_scope(conn, caller(agent, ["solo"]), "solo", "write")


@pytest.mark.parametrize("mode", ["read", "write"])
async def test_listing_every_scope_agrees_with_resolving_each_one(conn: psycopg.AsyncConnection, mode: str) -> None:
    await _world(conn)
    expected = {
        "read": {"cursor": {"shared", "solo", "team-a"}, "codex": {"shared", "solo"},
                 "ci-bot": {"shared", "team-a", "bots"}, "reader": {"shared", "team-a", "bots"}},
        "write": {"cursor": {"shared", "solo", "team-a"}, "codex": {"shared", "solo"},
                  "ci-bot": {"shared", "team-a", "bots"}, "reader": set()},
    }[mode]
    for agent, (read, write) in AGENTS.items():
        who = caller(agent, read, write)
        listed = await access.accessible_scopes(conn, who, mode)  # type: ignore[arg-type]
        assert {s.name for s in listed} == expected[agent], agent
        for scope in listed:
            resolved = await access.resolve_scope(conn, who, scope.name, mode)  # type: ignore[arg-type]
            assert resolved == scope, (agent, scope)
        for name in {"shared", "team-a", "locked", "bots"} - expected[agent]:
            with pytest.raises(ScopeDenied):
                await access.resolve_scope(conn, who, name, mode)  # type: ignore[arg-type]


async def test_a_solo_scope_is_its_owners_alone(conn: psycopg.AsyncConnection) -> None:
    await _world(conn)
    codex = caller("codex", ["shared", "solo"])
    listed = {s.stored_name for s in await access.accessible_scopes(conn, codex, "read")}
    assert listed == {"shared", "solo:codex"}
    for bad in ("solo:cursor", "  "):
        with pytest.raises(InvalidArgument):
            await access.resolve_scope(conn, codex, bad, "read")
    fresh = await access.resolve_scope(conn, caller("claude-code", ["solo"]), "solo", "read")
    assert fresh == access.Scope(id=None, name="solo", stored_name="solo:claude-code")
    with pytest.raises(NotFound, match="echo-memory scope create ghost"):
        await access.resolve_scope(conn, caller("ci-bot", ["*"]), "ghost", "read")


async def test_a_read_names_at_most_twenty_scopes(conn: psycopg.AsyncConnection) -> None:
    who = caller("ci-bot", ["*"])
    with pytest.raises(InvalidArgument, match="at least one"):
        await access.resolve_read_scopes(conn, who, [])
    with pytest.raises(InvalidArgument, match="at most 20"):
        await access.resolve_read_scopes(conn, who, [f"s{i}" for i in range(21)])
    assert [s.name for s in await access.resolve_read_scopes(conn, who, ["shared", "shared"])] == ["shared"]
