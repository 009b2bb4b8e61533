"""Tokens, scopes and status: the CLI's verbs on the writes service."""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from libs.contracts.admin import (
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
from libs.contracts.bus import Caller
from libs.contracts.errors import InvalidArgument, ScopeDenied
from libs.store import tokens
from libs.store.schema import read_version_async
from libs.store.scopes import SCOPE_STATS
from services.writes import queries as q

ADMIN_AGENTS = frozenset({"admin"})


def require_admin(caller: Caller) -> None:
    """Token management is for the org's operator identity (the CLI on the host, the k8s operator)."""
    if caller.agent_id not in ADMIN_AGENTS:
        raise ScopeDenied(f"agent '{caller.agent_id}' may not manage tokens or scopes")


async def token_create(conn: psycopg.AsyncConnection, caller: Caller, args: TokenCreateInput) -> TokenCreateResult:
    require_admin(caller)
    if args.agent_id in ADMIN_AGENTS:
        raise InvalidArgument(f"'{args.agent_id}' is reserved for the operator identity")
    token = tokens.mint(caller.org)
    await conn.execute(tokens.UPSERT_AGENT, (args.agent_id,))
    row = await (
        await conn.execute(
            tokens.INSERT_TOKEN,
            (tokens.hash_token(token), tokens.display_prefix(token), args.agent_id, args.read_scopes, args.write_scopes),
        )
    ).fetchone()
    return TokenCreateResult(token=token, token_id=str(row[0]), agent_id=args.agent_id)  # type: ignore[index]


async def token_verify(conn: psycopg.AsyncConnection, caller: Caller, args: TokenVerifyInput) -> TokenVerifyResult:
    """Any caller may ask; the answer says only whether the token is live and what it grants."""
    row = await (await conn.execute(tokens.VERIFY_TOKEN, (tokens.hash_token(args.token),))).fetchone()
    if row is None:
        return TokenVerifyResult(valid=False)
    return TokenVerifyResult(valid=True, agent_id=row[0], read_scopes=list(row[1]), write_scopes=list(row[2]))


async def token_list(conn: psycopg.AsyncConnection, caller: Caller, args: NoArgs) -> TokenListResult:
    require_admin(caller)
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
    require_admin(caller)
    if bool(args.token_id) == bool(args.agent_id):
        raise InvalidArgument("give exactly one of token_id or agent_id")
    if args.token_id:
        result = await conn.execute(tokens.REVOKE_BY_ID, (args.token_id,))
    else:
        result = await conn.execute(tokens.REVOKE_BY_AGENT, (args.agent_id,))
    return TokenRevokeResult(revoked=result.rowcount)


async def scope_create(conn: psycopg.AsyncConnection, caller: Caller, args: ScopeCreateInput) -> ScopeCreateResult:
    require_admin(caller)
    if args.name in ("shared", "solo"):
        raise InvalidArgument(f"'{args.name}' is built in and always exists")
    row = await (await conn.execute(q.INSERT_NAMED_SCOPE, (args.name, args.description))).fetchone()
    return ScopeCreateResult(name=args.name, created=row is not None)


async def status(conn: psycopg.AsyncConnection, caller: Caller, args: NoArgs) -> StatusResult:
    version = await read_version_async(conn)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(SCOPE_STATS)
        counts = [ScopeCount(scope=r.pop("name"), **r) for r in await cur.fetchall()]
    return StatusResult(schema_version=version, scopes=counts)
