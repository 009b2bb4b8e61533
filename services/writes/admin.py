"""Tokens, scopes and status: the CLI's verbs on the writes service."""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.admin import (
    AgentCount,
    NoArgs,
    ScopeCount,
    ScopeCreateInput,
    ScopeCreateResult,
    StatusResult,
    TokenCreateInput,
    TokenCreateResult,
    TokenInfo,
    TokenListResult,
    TokenRevokeInput,
    TokenRevokeResult,
    TokenVerifyInput,
    TokenVerifyResult,
)
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.server.store import access, tokens
from echo_memory.libs.server.store.schema import read_version_async
from echo_memory.libs.server.store.scopes import SCOPE_STATS, SCOPE_WRITERS

MANAGE = "manage tokens or scopes"


async def token_create(conn: psycopg.AsyncConnection, caller: Caller, args: TokenCreateInput) -> TokenCreateResult:
    """A new token for `args.agent_id`, shown once.

    Raises ScopeDenied unless the caller is the admin identity; InvalidArgument for the reserved
    admin agent id.
    """
    access.require_admin(caller, MANAGE)
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
    access.require_admin(caller, MANAGE)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(tokens.LIST_TOKENS)
        rows = await cur.fetchall()
    return TokenListResult(
        tokens=[
            TokenInfo(token_id=str(r["id"]), prefix=r["prefix"], agent_id=r["agent_id"], read_scopes=r["read_scopes"],
                      write_scopes=r["write_scopes"], created_at=r["created_at"], revoked_at=r["revoked_at"])
            for r in rows
        ]
    )


async def token_revoke(conn: psycopg.AsyncConnection, caller: Caller, args: TokenRevokeInput) -> TokenRevokeResult:
    access.require_admin(caller, MANAGE)
    if bool(args.token_id) == bool(args.agent_id):
        raise InvalidArgument("give exactly one of token_id or agent_id")
    if args.token_id:
        result = await conn.execute(tokens.REVOKE_BY_ID, (args.token_id,))
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
