"""The writes service's subscribers: one queue group, one transaction per request.

Every verb that changes memory commits its outbox rows with its change, then kicks the outbox
relay (relay.py), which also runs on a timer as the service's background task.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import psycopg
from faststream import Path
from faststream.nats import NatsRouter

from libs.bus.service import ServiceContext, parse_args
from libs.contracts import admin as admin_contracts
from libs.contracts import documents as doc_contracts
from libs.contracts.bus import Caller, Reply, Request
from libs.contracts.errors import Conflict, EchoError, Internal, InvalidArgument, Unavailable
from libs.contracts.subjects import queue_group, subscribe_pattern
from libs.contracts.write import WriteEpisodeInput, WriteEpisodeResult
from services.writes import admin, documents, idempotency, recall
from services.writes.episode import write_episode
from services.writes.relay import OutboxRelay

SERVICE = "writes"
# Requests handled at once per process. Writers of one scope still queue on the scope lock;
# this lets writers of other scopes, reads of pending documents and admin verbs proceed.
MAX_WORKERS = 4

log = logging.getLogger(__name__)


def build_router(ctx: ServiceContext) -> NatsRouter:
    router = NatsRouter()
    queue = queue_group(SERVICE)
    relay = OutboxRelay(ctx)
    ctx.extra["relay"] = relay
    ctx.extra["on_start"] = relay.run

    def sub(verb: str):  # type: ignore[no-untyped-def]
        return router.subscriber(subscribe_pattern(SERVICE, verb), queue=queue, max_workers=MAX_WORKERS)

    async def changing(org: str, request: Request, model: type, fn: Callable[..., Awaitable]) -> Reply:  # type: ignore[type-arg]
        reply = await ctx.handle(org, request, model, fn)
        if reply.ok:
            relay.kick(org)
        return reply

    @sub("write_episode")
    async def on_write_episode(request: Request, org: str = Path()) -> Reply:
        result = await handle_write_episode(ctx, org, request)
        if result.stored:
            relay.kick(org)
        return Reply.success(result)

    @sub("record_recall_save")
    async def on_record_recall_save(request: Request, org: str = Path()) -> Reply:
        return await changing(org, request, doc_contracts.RecordRecallSaveInput, recall.record_recall_save)

    @sub("register_documents")
    async def on_register_documents(request: Request, org: str = Path()) -> Reply:
        return await changing(org, request, doc_contracts.RegisterDocumentsInput, documents.register_documents)

    @sub("pending_documents")
    async def on_pending_documents(request: Request, org: str = Path()) -> Reply:
        return await ctx.handle(org, request, doc_contracts.PendingDocumentsInput, documents.pending_documents)

    @sub("mark_ingested")
    async def on_mark_ingested(request: Request, org: str = Path()) -> Reply:
        return await changing(org, request, doc_contracts.MarkIngestedInput, documents.mark_ingested)

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

    @sub("import_episodes")  # issue 4: batched import of raw turns/documents (services/writes/batch_import.py)
    async def on_import_episodes(request: Request, org: str = Path()) -> Reply:
        from libs.contracts.imports import ImportEpisodesInput
        from services.writes.batch_import import import_episodes

        assert ctx.embedder is not None
        return await ctx.handle(org, request, ImportEpisodesInput, lambda c, k, a: import_episodes(c, k, a, ctx.embedder))

    return router


async def handle_write_episode(ctx: ServiceContext, org: str, request: Request) -> WriteEpisodeResult:
    """Always a WriteEpisodeResult: a refusal is an outcome with `error` set, never an exception.

    The idempotency check, the write and remembering the response share one transaction, so a
    retried key either sees the committed first response or waits for it.
    """
    caller: Caller = request.caller
    try:
        args = parse_args(WriteEpisodeInput, request.args)
        if caller.org != org:
            raise InvalidArgument("the caller's org does not match the subject's org")
        if ctx.embedder is None:
            raise Internal("the writes service was started without its embedding model")
        async with ctx.databases.transaction(org) as conn:
            if args.idempotency_key:
                earlier = await idempotency.lookup(conn, caller, args)
                if earlier is not None:
                    return earlier
            result = await write_episode(conn, caller, args, ctx.embedder)
            if args.idempotency_key:
                await idempotency.remember(conn, caller, args, result)
        return result
    except EchoError as exc:
        return _refused(exc)
    except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected, psycopg.errors.LockNotAvailable) as exc:
        return _refused(Conflict(f"a concurrent write got in the way ({type(exc).__name__}); retry the same call"))
    except psycopg.OperationalError as exc:
        return _refused(Unavailable(f"the database failed: {type(exc).__name__}; nothing was stored"))
    except Exception as exc:  # the seam where a bug becomes a typed refusal instead of silence
        log.exception("write_episode failed")
        return _refused(Internal(f"write_episode failed with {type(exc).__name__}; nothing was stored"))


def _refused(error: EchoError) -> WriteEpisodeResult:
    return WriteEpisodeResult(stored=False, not_stored="refused", retryable=error.retryable, error=error.to_info())
