"""The writes service's subscribers: one queue group, one transaction per request."""

from __future__ import annotations

from faststream import Path
from faststream.nats import NatsRouter

from libs.contracts import admin as admin_contracts
from libs.contracts.bus import Caller, Reply, Request
from libs.contracts.errors import EchoError, Internal
from libs.contracts.subjects import queue_group, subscribe_pattern
from libs.contracts.write import WriteEpisodeInput, WriteEpisodeResult
from libs.bus.service import ServiceContext, not_built_router, parse_args
from services.writes import admin, idempotency
from services.writes.episode import _Deferred, write_episode

SERVICE = "writes"


def build_router(ctx: ServiceContext) -> NatsRouter:
    router = NatsRouter()
    queue = queue_group(SERVICE)

    def sub(verb: str):  # type: ignore[no-untyped-def]
        return router.subscriber(subscribe_pattern(SERVICE, verb), queue=queue)

    @sub("write_episode")
    async def on_write_episode(request: Request, org: str = Path()) -> Reply:
        return Reply.success(await handle_write_episode(ctx, org, request))

    @sub("token_create")
    async def on_token_create(request: Request, org: str = Path()) -> Reply:
        return await ctx.handle(org, request, admin_contracts.TokenCreateInput, admin.token_create)

    @sub("token_verify")
    async def on_token_verify(request: Request, org: str = Path()) -> Reply:
        return await ctx.handle(org, request, admin_contracts.TokenVerifyInput, admin.token_verify)

    @sub("token_list")
    async def on_token_list(request: Request, org: str = Path()) -> Reply:
        return await ctx.handle(org, request, admin_contracts.NoArgs, admin.token_list)

    @sub("token_revoke")
    async def on_token_revoke(request: Request, org: str = Path()) -> Reply:
        return await ctx.handle(org, request, admin_contracts.TokenRevokeInput, admin.token_revoke)

    @sub("scope_create")
    async def on_scope_create(request: Request, org: str = Path()) -> Reply:
        return await ctx.handle(org, request, admin_contracts.ScopeCreateInput, admin.scope_create)

    @sub("status")
    async def on_status(request: Request, org: str = Path()) -> Reply:
        return await ctx.handle(org, request, admin_contracts.NoArgs, admin.status)

    router.include_router(
        not_built_router(SERVICE, ("record_recall_save", "pending_documents", "mark_ingested", "register_documents"), "issue 3")
    )
    return router


async def handle_write_episode(ctx: ServiceContext, org: str, request: Request) -> WriteEpisodeResult:
    """Always a WriteEpisodeResult: a refusal is an outcome with `error` set, never an exception."""
    caller: Caller = request.caller
    try:
        args = parse_args(WriteEpisodeInput, request.args)
        if caller.org != org:
            raise Internal("the caller's org does not match the subject's org")
        assert ctx.embedder is not None
        if args.idempotency_key:
            async with ctx.databases.transaction(org) as conn:
                earlier = await idempotency.lookup(conn, caller, args.idempotency_key)
            if earlier is not None:
                return earlier
        try:
            async with ctx.databases.transaction(org) as conn:
                result = await write_episode(conn, caller, args, ctx.embedder)
                if args.idempotency_key:
                    await idempotency.remember(conn, caller, args.idempotency_key, result)
        except _Deferred as deferral:
            result = deferral.result
        return result
    except EchoError as exc:
        return WriteEpisodeResult(
            stored=False, not_stored="refused", retryable=exc.retryable, error=exc.to_info()
        )
    except Exception as exc:
        import logging

        logging.getLogger(__name__).exception("write_episode failed")
        error = Internal(f"write_episode failed with {type(exc).__name__}; nothing was stored")
        return WriteEpisodeResult(stored=False, not_stored="refused", error=error.to_info())
