"""Who may do what in an org: the admin identity, the builtin scopes, scope access, tokens, scopes.

Every rule about access has its one definition here. The services' async verbs and the sync
paths (the CLI offline, the Kubernetes operator, the test stack) call the same functions, which
share the SQL below and the validation; only the thin `*_async` / sync wrappers differ.

- The **admin identity** is the caller whose agent id is `admin` *and* whose grants are `*` for
  reading and writing. The CLI on the host and the operator act as it over the bus; no token can
  carry it (issuing one for `admin` is refused and such a token never verifies), so an agent
  reaching the MCP edge is never an admin, whatever scopes its token lists.
- **Builtin scopes**: `shared` (every agent of the org) and `solo` (stored per agent as
  `solo:<agent>`). Every other scope is a named scope, created by the admin.
- A caller may **read or write a scope** when its token grants the scope's public name (or `*`)
  in that mode *and* the scope's own reader or writer list names the agent (or `*`). A solo
  scope is visible only to its owner, as `solo`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound, ScopeDenied
from echo_memory.libs.core.contracts.identity import ADMIN_AGENT as ADMIN_AGENT
from echo_memory.libs.core.contracts.identity import BUILTIN_SCOPES as BUILTIN_SCOPES
from echo_memory.libs.core.contracts.identity import DEFAULT_GRANTS as DEFAULT_GRANTS
from echo_memory.libs.core.contracts.identity import SHARED as SHARED
from echo_memory.libs.core.contracts.identity import SOLO as SOLO
from echo_memory.libs.core.contracts.identity import SOLO_PREFIX as SOLO_PREFIX
from echo_memory.libs.core.contracts.identity import WILDCARD as WILDCARD
from echo_memory.libs.core.contracts.identity import admin_caller as admin_caller
from echo_memory.libs.core.contracts.identity import is_admin as is_admin
from echo_memory.libs.core.contracts.identity import is_reserved_agent as is_reserved_agent
from echo_memory.libs.core.contracts.identity import require_admin as require_admin
from echo_memory.libs.server.store import tokens

Mode = Literal["read", "write"]

MAX_SCOPES_PER_READ = 20

# The loosest names any entry point accepts (the operator's CRD fields); the bus contracts are
# stricter still, so these checks only refuse what no path should store.
AGENT_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
NAMED_SCOPE_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")

SELECT_SCOPE = """
SELECT id, name, kind, owner_agent, readers, writers FROM scopes WHERE name = %s
"""
ALL_SCOPES = """
SELECT id, name, kind, owner_agent, readers, writers FROM scopes ORDER BY created_at, id
"""
INSERT_SOLO = """
INSERT INTO scopes (name, kind, owner_agent, description, readers, writers)
VALUES (%s, 'solo', %s, 'Private memory of one agent.', ARRAY[%s], ARRAY[%s])
ON CONFLICT (name) DO NOTHING
"""
# One statement for `scope create` (replace false: an existing scope is left as it is) and the
# operator's declarative MemoryScope (replace true). Builtin rows are never touched. `xmax = 0`
# holds only for a row this statement inserted; no row comes back when nothing was written.
SAVE_NAMED_SCOPE = """
INSERT INTO scopes (name, kind, description, readers, writers, retention_days)
VALUES (%(name)s, 'named', %(description)s, %(readers)s, %(writers)s, %(retention_days)s)
ON CONFLICT (name) DO UPDATE
SET description = EXCLUDED.description, readers = EXCLUDED.readers,
    writers = EXCLUDED.writers, retention_days = EXCLUDED.retention_days
WHERE scopes.kind = 'named' AND %(replace)s
RETURNING (xmax = 0) AS created
"""


# ---- scope names -------------------------------------------------------------------------------

def public_name(stored: str) -> str:
    """The name callers use for a stored scope row: every `solo:<agent>` is just `solo` to its owner."""
    return SOLO if stored.startswith(SOLO_PREFIX) else stored


def stored_name(caller: Caller, name: str) -> str:
    """The row name behind a public scope name: `solo` is `solo:<agent>`, any other name itself."""
    return f"{SOLO_PREFIX}{caller.agent_id}" if name == SOLO else name


def check_named_scope(name: str) -> None:
    """Return when `name` may be created as a named scope.

    Raises:
        InvalidArgument: a builtin name, a `solo:` row name, or a name outside NAMED_SCOPE_PATTERN.
    """
    if name in BUILTIN_SCOPES or name.startswith(SOLO_PREFIX):
        raise InvalidArgument(f"'{name}' is a built-in scope; it always exists and cannot be created")
    if not NAMED_SCOPE_PATTERN.match(name):
        raise InvalidArgument(f"scope name {name!r} must be lowercase letters, digits, '.', '_' or '-'")


def check_token_agent(agent_id: str) -> None:
    """Return when a token may be issued for `agent_id`.

    Raises:
        InvalidArgument: a reserved id (admin, the post-hoc commands'), or an id outside AGENT_ID_PATTERN.
    """
    if is_reserved_agent(agent_id):
        raise InvalidArgument(f"'{agent_id}' is reserved for the operator or a post-hoc command; no token can carry it")
    if not AGENT_ID_PATTERN.match(agent_id):
        raise InvalidArgument(f"agent id {agent_id!r} must be letters, digits, '.', '_' or '-'")


# ---- who may read or write a scope -------------------------------------------------------------

def token_grants(caller: Caller, public: str, mode: Mode) -> bool:
    """True when the caller's token grants `mode` on the scope called `public` (or on `*`)."""
    granted = caller.read_scopes if mode == "read" else caller.write_scopes
    return WILDCARD in granted or public in granted


def scope_admits(caller: Caller, members: list[str]) -> bool:
    """True when a scope's reader or writer list names the caller's agent (or `*`)."""
    return WILDCARD in members or caller.agent_id in members


@dataclass(frozen=True)
class Scope:
    id: str | None  # None: a solo scope nobody has written to yet (reads find nothing)
    name: str  # the name the caller uses: shared, solo, team-a
    stored_name: str  # the row's name: solo becomes solo:<agent>


async def resolve_scope(
    conn: psycopg.AsyncConnection, caller: Caller, requested: str | None, mode: Mode
) -> Scope:
    """The scope a request may use (default `shared`); a first write to `solo` creates its row.

    Returns a Scope with id None for a `solo` read before the agent ever wrote there.

    Raises:
        InvalidArgument: an empty name or a `solo:<agent>` row name.
        ScopeDenied: the token does not grant `mode` on that scope, or the scope's own
            reader/writer list excludes the agent.
        NotFound: a named scope that does not exist.
    """
    name = (requested or SHARED).strip()
    if not name or name.startswith(SOLO_PREFIX):
        raise InvalidArgument(f"scope {name!r} is not a valid scope name")
    if not token_grants(caller, name, mode):
        allowed = caller.read_scopes if mode == "read" else caller.write_scopes
        raise ScopeDenied(
            f"this token may not {mode} scope '{name}' (it may {mode}: {', '.join(allowed) or 'nothing'})"
        )
    row_name = stored_name(caller, name)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(SELECT_SCOPE, (row_name,))
        row = await cur.fetchone()
        if row is None and name == SOLO:
            if mode == "read":
                return Scope(id=None, name=name, stored_name=row_name)
            await cur.execute(INSERT_SOLO, (row_name, caller.agent_id, caller.agent_id, caller.agent_id))
            await cur.execute(SELECT_SCOPE, (row_name,))
            row = await cur.fetchone()
    if row is None:
        raise NotFound(f"scope '{name}' does not exist; create it with `echo-memory scope create {name}`")
    if not scope_admits(caller, row["readers"] if mode == "read" else row["writers"]):
        raise ScopeDenied(f"agent '{caller.agent_id}' is not among the {mode}rs of scope '{name}'")
    return Scope(id=str(row["id"]), name=name, stored_name=row_name)


async def resolve_read_scopes(
    conn: psycopg.AsyncConnection, caller: Caller, requested: str | list[str] | None
) -> list[Scope]:
    """Every scope a read names (default: shared), each checked as in `resolve_scope`, in order.

    Raises:
        InvalidArgument: an empty list or more than MAX_SCOPES_PER_READ names; else as `resolve_scope`.
    """
    names = [requested] if requested is None or isinstance(requested, str) else requested
    if isinstance(requested, list) and not requested:
        raise InvalidArgument("scope must name at least one scope when given as a list")
    if len(names) > MAX_SCOPES_PER_READ:
        raise InvalidArgument(f"at most {MAX_SCOPES_PER_READ} scopes may be read at once")
    return [await resolve_scope(conn, caller, name, "read") for name in dict.fromkeys(names)]


async def named_or_readable_scopes(
    conn: psycopg.AsyncConnection, caller: Caller, requested: str | list[str] | None
) -> list[Scope]:
    """The scopes a read names, checked as in `resolve_read_scopes`; when it names none, every
    scope `caller` may read (`accessible_scopes`), which may be an empty list.

    For listings (brief, abstracts, deferred mentions) that span what the caller can see, unlike a
    search, whose default is the shared scope.
    """
    if requested is None:
        return await accessible_scopes(conn, caller, "read")
    return await resolve_read_scopes(conn, caller, requested)


async def accessible_scopes(conn: psycopg.AsyncConnection, caller: Caller, mode: Mode) -> list[Scope]:
    """Every existing scope `caller` may use in `mode`, oldest first, by the rule of `resolve_scope`.

    Returns an empty list when it may use none; another agent's solo scope is never listed, a
    solo scope the caller never wrote to has no row and is not listed either.
    """
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(ALL_SCOPES)
        rows = await cur.fetchall()
    own_solo = stored_name(caller, SOLO)
    out: list[Scope] = []
    for row in rows:
        stored: str = row["name"]
        if stored.startswith(SOLO_PREFIX) and stored != own_solo:
            continue
        public = public_name(stored)
        members = row["readers"] if mode == "read" else row["writers"]
        if token_grants(caller, public, mode) and scope_admits(caller, members):
            out.append(Scope(id=str(row["id"]), name=public, stored_name=stored))
    return out


# ---- issuing tokens ----------------------------------------------------------------------------

@dataclass(frozen=True)
class IssuedToken:
    token: str  # the only time the plain token exists outside its holder
    token_id: str
    agent_id: str


def _token_row(org: str, agent_id: str, read_scopes: list[str], write_scopes: list[str]) -> tuple[str, tuple[object, ...]]:
    check_token_agent(agent_id)
    token = tokens.mint(org)
    return token, (tokens.hash_token(token), tokens.display_prefix(token), agent_id, read_scopes, write_scopes)


async def issue_token_async(
    conn: psycopg.AsyncConnection, *, org: str, agent_id: str, read_scopes: list[str], write_scopes: list[str]
) -> IssuedToken:
    """Mint a token for `agent_id`, store its hash in the caller's transaction and return it.

    Raises:
        InvalidArgument: the agent id is reserved or malformed (nothing is written).
    """
    token, row = _token_row(org, agent_id, read_scopes, write_scopes)
    await conn.execute(tokens.UPSERT_AGENT, (agent_id,))
    stored = await (await conn.execute(tokens.INSERT_TOKEN, row)).fetchone()
    assert stored is not None  # INSERT … RETURNING always returns the row it inserted
    return IssuedToken(token=token, token_id=str(stored[0]), agent_id=agent_id)


def issue_token(
    conn: psycopg.Connection, *, org: str, agent_id: str, read_scopes: list[str], write_scopes: list[str]
) -> IssuedToken:
    """As `issue_token_async`, on a sync connection (the CLI offline, the operator, tests)."""
    token, row = _token_row(org, agent_id, read_scopes, write_scopes)
    conn.execute(tokens.UPSERT_AGENT, (agent_id,))
    stored = conn.execute(tokens.INSERT_TOKEN, row).fetchone()
    assert stored is not None  # INSERT … RETURNING always returns the row it inserted
    return IssuedToken(token=token, token_id=str(stored[0]), agent_id=agent_id)


# ---- creating named scopes ---------------------------------------------------------------------

def _scope_params(
    name: str, description: str, readers: list[str] | None, writers: list[str] | None,
    retention_days: int | None, replace: bool,
) -> dict[str, object]:
    check_named_scope(name)
    if retention_days is not None and retention_days < 1:
        raise InvalidArgument(f"retention_days must be a positive number of days, got {retention_days}")
    # An empty list would lock every agent out; like no list, it means every agent.
    return {"name": name, "description": description, "readers": readers or [WILDCARD],
            "writers": writers or [WILDCARD], "retention_days": retention_days, "replace": replace}


async def save_scope_async(
    conn: psycopg.AsyncConnection, *, name: str, description: str = "", readers: list[str] | None = None,
    writers: list[str] | None = None, retention_days: int | None = None, replace: bool = False,
) -> bool:
    """Create the named scope `name` in the caller's transaction; True when this call created it.

    With `replace`, an existing named scope takes the given description, readers, writers and
    retention; without it, an existing scope is left unchanged (False). Readers and writers
    default to every agent.

    Raises:
        InvalidArgument: a builtin or malformed name, or a retention below one day (nothing is written).
    """
    params = _scope_params(name, description, readers, writers, retention_days, replace)
    row = await (await conn.execute(SAVE_NAMED_SCOPE, params)).fetchone()
    return bool(row and row[0])


def save_scope(
    conn: psycopg.Connection, *, name: str, description: str = "", readers: list[str] | None = None,
    writers: list[str] | None = None, retention_days: int | None = None, replace: bool = False,
) -> bool:
    """As `save_scope_async`, on a sync connection (the operator's MemoryScope, tests)."""
    params = _scope_params(name, description, readers, writers, retention_days, replace)
    row = conn.execute(SAVE_NAMED_SCOPE, params).fetchone()
    return bool(row and row[0])
