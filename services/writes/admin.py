"""Tokens, scopes and status: the CLI's verbs on the writes service."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.admin import (
    AgentCount,
    NoArgs,
    ScopeCount,
    ScopeCreateInput,
    ScopeCreateResult,
    ScopeDeleteResult,
    ScopeInfo,
    ScopeListResult,
    ScopeNameInput,
    ScopeShowResult,
    StatusResult,
    TokenAccess,
    TokenCreateInput,
    TokenCreateResult,
    TokenGrantInput,
    TokenGrantResult,
    TokenInfo,
    TokenListResult,
    TokenRevokeInput,
    TokenRevokeResult,
    TokenVerifyInput,
    TokenVerifyResult,
)
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound
from echo_memory.libs.server.store import access, tokens
from echo_memory.libs.server.store.schema import read_version_async
from echo_memory.libs.server.store.scopes import SCOPE_STATS, SCOPE_WRITERS
from echo_memory.services.writes import admin_queries as q

MANAGE = "manage tokens or scopes"


async def token_create(conn: psycopg.AsyncConnection, caller: Caller, args: TokenCreateInput) -> TokenCreateResult:
    """A new token for `args.agent_id`, shown once.

    Raises ScopeDenied unless the caller is the admin identity; InvalidArgument for the reserved
    admin agent id or a `solo:<agent>` row name; NotFound for a named scope that does not exist
    (create it first with `echo-memory scope create`). Nothing is written when it raises.
    """
    access.require_admin(caller, MANAGE)
    await _check_grantable(conn, [*args.read_scopes, *args.write_scopes])
    issued = await access.issue_token_async(
        conn, org=caller.org, agent_id=args.agent_id, read_scopes=args.read_scopes, write_scopes=args.write_scopes
    )
    return TokenCreateResult(token=issued.token, token_id=issued.token_id, agent_id=issued.agent_id)


async def token_verify(conn: psycopg.AsyncConnection, caller: Caller, args: TokenVerifyInput) -> TokenVerifyResult:
    """Any caller may ask, by the token's digest; the answer says only whether it is live and what it grants.

    A token of the reserved admin agent id is never valid: the admin identity is not reachable
    through a token.
    """
    row = await (await conn.execute(tokens.VERIFY_TOKEN, (args.token_hash,))).fetchone()
    if row is None or access.is_reserved_agent(row[0]):
        return TokenVerifyResult(valid=False)
    return TokenVerifyResult(valid=True, agent_id=row[0], read_scopes=list(row[1]), write_scopes=list(row[2]),
                             token_id=str(row[3]))


async def token_list(conn: psycopg.AsyncConnection, caller: Caller, args: NoArgs) -> TokenListResult:
    """Every token of the org, live and revoked, oldest first (prefixes only); an empty list when there are none."""
    access.require_admin(caller, MANAGE)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(tokens.LIST_TOKENS)
        rows = await cur.fetchall()
    return TokenListResult(tokens=[_token_info(r) for r in rows])


def _token_info(row: dict[str, Any]) -> TokenInfo:
    return TokenInfo(token_id=str(row["id"]), prefix=row["prefix"], agent_id=row["agent_id"],
                     read_scopes=row["read_scopes"], write_scopes=row["write_scopes"], created_at=row["created_at"],
                     revoked_at=row["revoked_at"])


def _token_id(value: str) -> uuid.UUID:
    """A token id as the database stores it; InvalidArgument for anything that is not one."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InvalidArgument(
            f"token id {value!r} is not a token id; `echo-memory token list` shows each token's id"
        ) from None


async def _check_grantable(conn: psycopg.AsyncConnection, names: list[str]) -> None:
    """Return when every name is `*`, a builtin scope or an existing named scope.

    Raises:
        InvalidArgument: a `solo:<agent>` row name or an empty name.
        NotFound: a named scope that does not exist, naming `echo-memory scope create`.
    """
    named = []
    for name in dict.fromkeys(names):
        if not name or name.startswith(access.SOLO_PREFIX):
            raise InvalidArgument(
                f"scope {name!r} cannot be granted; grant 'solo' for an agent's own scope, or a named scope")
        if name != access.WILDCARD and name not in access.BUILTIN_SCOPES:
            named.append(name)
    if not named:
        return
    rows = await (await conn.execute(q.EXISTING_SCOPES, (named,))).fetchall()
    missing = [name for name in named if name not in {r[0] for r in rows}]
    if missing:
        hint = "; ".join(f"`echo-memory scope create {name}`" for name in missing)
        raise NotFound(f"scope {', '.join(repr(m) for m in missing)} does not exist; create it first with {hint}")


async def token_grant(conn: psycopg.AsyncConnection, caller: Caller, args: TokenGrantInput) -> TokenGrantResult:
    """Add scopes to a live token's read and write grants; grants it already has stay, and naming one again adds nothing.

    The edge caches a token's grants for up to 30 s, so a new grant may take that long to apply.

    Raises:
        ScopeDenied: the caller is not the admin identity.
        InvalidArgument: a malformed token id, no scope given, a revoked token, or a `solo:<agent>` name.
        NotFound: no token with that id, or a named scope that does not exist.
    """
    access.require_admin(caller, MANAGE)
    token_id = _token_id(args.token_id)
    if not args.read_scopes and not args.write_scopes:
        raise InvalidArgument("name at least one scope to grant for reading or writing")
    await _check_grantable(conn, [*args.read_scopes, *args.write_scopes])
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.TOKEN_BY_ID, (token_id,))
        row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no token has id {args.token_id}; `echo-memory token list` shows each token's id")
        if row["revoked_at"] is not None:
            raise InvalidArgument(f"token {args.token_id} was revoked; issue a new one with `echo-memory token create`")
        added_read = [s for s in dict.fromkeys(args.read_scopes) if s not in row["read_scopes"]]
        added_write = [s for s in dict.fromkeys(args.write_scopes) if s not in row["write_scopes"]]
        await cur.execute(q.GRANT_TOKEN, {"id": token_id, "read": [*row["read_scopes"], *added_read],
                                          "write": [*row["write_scopes"], *added_write]})
        updated = await cur.fetchone()
    assert updated is not None  # the row is locked and live
    return TokenGrantResult(token=_token_info(updated), added_read=added_read, added_write=added_write)


async def token_revoke(conn: psycopg.AsyncConnection, caller: Caller, args: TokenRevokeInput) -> TokenRevokeResult:
    """Revoke one token by id, or every live token of an agent; `revoked` counts the tokens this call ended.

    Raises:
        ScopeDenied: the caller is not the admin identity.
        InvalidArgument: neither or both of token_id and agent_id, or a token id that is not one.
        NotFound: no token, live or revoked, has that id.
    """
    access.require_admin(caller, MANAGE)
    if bool(args.token_id) == bool(args.agent_id):
        raise InvalidArgument("give exactly one of token_id or agent_id")
    if args.token_id:
        token_id = _token_id(args.token_id)
        result = await conn.execute(tokens.REVOKE_BY_ID, (token_id,))
        if result.rowcount == 0 and await (await conn.execute(q.TOKEN_BY_ID, (token_id,))).fetchone() is None:
            raise NotFound(f"no token has id {args.token_id}; `echo-memory token list` shows each token's id")
    else:
        result = await conn.execute(tokens.REVOKE_BY_AGENT, (args.agent_id,))
    return TokenRevokeResult(revoked=result.rowcount)


async def scope_create(conn: psycopg.AsyncConnection, caller: Caller, args: ScopeCreateInput) -> ScopeCreateResult:
    """Create a named scope every agent may read and write; created=false when it already exists.

    Raises ScopeDenied unless the caller is the admin identity; InvalidArgument for a builtin name.
    """
    access.require_admin(caller, MANAGE)
    created = await access.save_scope_async(conn, name=args.name, description=args.description)
    return ScopeCreateResult(name=args.name, created=created)


def _scope_info(row: dict[str, Any]) -> ScopeInfo:
    return ScopeInfo(name=row["name"], kind=row["kind"], description=row["description"], facts=row["facts"],
                     active_facts=row["active_facts"], episodes=row["episodes"], created_at=row["created_at"])


async def _scope_row(conn: psycopg.AsyncConnection, name: str) -> dict[str, Any]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.SCOPE_BY_NAME, (name,))
        row = await cur.fetchone()
    if row is None:
        raise NotFound(f"scope '{name}' does not exist; `echo-memory scope list` shows every scope")
    return row


async def scope_list(conn: psycopg.AsyncConnection, caller: Caller, args: NoArgs) -> ScopeListResult:
    """Every scope of the org (solo scopes as `solo:<agent>`), oldest first, with its facts and episodes.

    Raises ScopeDenied unless the caller is the admin identity.
    """
    access.require_admin(caller, MANAGE)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.SCOPE_LIST)
        rows = await cur.fetchall()
    return ScopeListResult(scopes=[_scope_info(r) for r in rows])


async def scope_show(conn: psycopg.AsyncConnection, caller: Caller, args: ScopeNameInput) -> ScopeShowResult:
    """One scope, its reader and writer lists, and every live token that may read or write it.

    A token counts when its grants name the scope (`solo` for its own solo scope) or `*`, and the
    scope's list admits its agent: the rule every read and write applies (access.py). `tokens` is
    empty when no live token may use the scope.

    Raises ScopeDenied unless the caller is the admin identity; NotFound for a scope that does not exist.
    """
    access.require_admin(caller, MANAGE)
    row = await _scope_row(conn, args.name)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.LIVE_TOKENS)
        live = await cur.fetchall()
    holders = []
    for t in live:
        holder = Caller(org=caller.org, agent_id=t["agent_id"], read_scopes=t["read_scopes"],
                        write_scopes=t["write_scopes"])
        if row["kind"] == "solo" and row["owner_agent"] != t["agent_id"]:
            continue  # a solo scope is its owner's alone, whatever another token grants
        public = access.public_name(row["name"])
        may_read = access.token_grants(holder, public, "read") and access.scope_admits(holder, row["readers"])
        may_write = access.token_grants(holder, public, "write") and access.scope_admits(holder, row["writers"])
        if may_read or may_write:
            holders.append(TokenAccess(token_id=str(t["id"]), prefix=t["prefix"], agent_id=t["agent_id"],
                                       read=may_read, write=may_write))
    return ScopeShowResult(scope=_scope_info(row), readers=row["readers"], writers=row["writers"], tokens=holders)


FORGET_HINT = "echo-memory forget --scope {name} --confirm"


async def scope_delete(conn: psycopg.AsyncConnection, caller: Caller, args: ScopeNameInput) -> ScopeDeleteResult:
    """Delete an empty named scope, its bookkeeping rows (audit entries, statistics) and its name from live grants.

    A scope holding facts, episodes or entities is refused: emptying it is an erasure, done by
    `echo-memory forget --scope NAME --confirm`, never as a side effect of this verb.

    Raises:
        ScopeDenied: the caller is not the admin identity.
        InvalidArgument: a builtin scope (`shared`, a solo scope), or a scope that still holds memory.
        NotFound: no scope has that name.
    """
    access.require_admin(caller, MANAGE)
    if args.name in access.BUILTIN_SCOPES or args.name.startswith(access.SOLO_PREFIX):
        raise InvalidArgument(f"'{args.name}' is a built-in scope; it cannot be deleted")
    row = await _scope_row(conn, args.name)
    # The scope's write lock keeps a write from landing between the emptiness check and the delete.
    await conn.execute(q.SCOPE_WRITE_LOCK, (str(row["id"]),))
    row = await _scope_row(conn, args.name)
    if row["facts"] or row["episodes"] or row["entities"]:
        raise InvalidArgument(
            f"scope '{args.name}' still holds {row['facts']} facts, {row['episodes']} episodes and "
            f"{row['entities']} entities; erase them first with `{FORGET_HINT.format(name=args.name)}`, "
            "then delete the scope")
    for statement in (q.DELETE_SCOPE_AUDIT, q.DELETE_SCOPE_DEFERRED, q.DELETE_SCOPE_LEXICAL_DF,
                      q.DELETE_SCOPE_LEXICAL_STATS, q.DELETE_SCOPE_EMBEDDING_MODEL):
        await conn.execute(statement, (row["id"],))
    ungranted = await conn.execute(q.UNGRANT_SCOPE, {"name": args.name})
    await conn.execute(q.DELETE_SCOPE, (row["id"],))
    return ScopeDeleteResult(name=args.name, tokens_updated=ungranted.rowcount)


async def status(conn: psycopg.AsyncConnection, caller: Caller, args: NoArgs) -> StatusResult:
    """The schema version and, per scope, its facts and which agents wrote them, how many, when last."""
    version = await read_version_async(conn)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(SCOPE_WRITERS)
        writers: dict[str, list[AgentCount]] = {}
        for r in await cur.fetchall():
            writers.setdefault(r.pop("name"), []).append(AgentCount(**r))
        await cur.execute(SCOPE_STATS)
        counts = [ScopeCount(scope=r["name"], facts=r["facts"], active_facts=r["active_facts"],
                             last_write=r["last_write"], writers=writers.get(r["name"], []))
                  for r in await cur.fetchall()]
    return StatusResult(schema_version=version, scopes=counts)
