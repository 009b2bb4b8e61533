"""The writes service's subscribers: one queue group, one transaction per request.

Every verb that changes memory commits its outbox rows with its change, then kicks the outbox
relay (relay.py), which also runs on a timer as the service's background task.
"""

from __future__ import annotations

import logging
from functools import partial

import psycopg
from faststream import Path
from faststream.nats import NatsRouter

from libs.bus.service import Route, ServiceContext, parse_args, route_router
from libs.contracts import admin as admin_contracts
from libs.contracts import documents as doc_contracts
from libs.contracts.bus import Caller, Reply, Request
from libs.contracts.imports import ImportEpisodesInput
from libs.contracts.errors import Conflict, EchoError, Internal, InvalidArgument, Unavailable
from libs.contracts.subjects import queue_group, subscribe_pattern
from libs.contracts.write import WriteEpisodeInput, WriteEpisodeResult
from services.writes import admin, documents, idempotency, recall
from services.writes.batch_import import import_episodes
from services.writes.episode import write_episode
from services.writes.relay import OutboxRelay

SERVICE = "writes"
# Requests handled at once per process. Writers of one scope still queue on the scope lock;
# this lets writers of other scopes, reads of pending documents and admin verbs proceed.
MAX_WORKERS = 4

log = logging.getLogger(__name__)


def build_router(ctx: ServiceContext) -> NatsRouter:
    relay = OutboxRelay(ctx)
    ctx.extra["relay"] = relay
    ctx.extra["on_start"] = relay.run
    assert ctx.embedder is not None, "the writes service embeds facts, so it is started with the model"
    changed = relay.kick  # verbs that commit outbox rows wake the relay once they have committed
    router = route_router(
        ctx,
        SERVICE,
        [
            Route("record_recall_save", doc_contracts.RecordRecallSaveInput, recall.record_recall_save, changed),
            Route("register_documents", doc_contracts.RegisterDocumentsInput, documents.register_documents, changed),
            Route("pending_documents", doc_contracts.PendingDocumentsInput, documents.pending_documents),
            Route("mark_ingested", doc_contracts.MarkIngestedInput, documents.mark_ingested, changed),
            Route("token_create", admin_contracts.TokenCreateInput, admin.token_create),
            Route("token_verify", admin_contracts.TokenVerifyInput, admin.token_verify),
            Route("token_list", admin_contracts.NoArgs, admin.token_list),
            Route("token_revoke", admin_contracts.TokenRevokeInput, admin.token_revoke),
            Route("scope_create", admin_contracts.ScopeCreateInput, admin.scope_create),
            Route("status", admin_contracts.NoArgs, admin.status),
            # issue 4: batched import of raw turns and documents as episodes
            Route("import_episodes", ImportEpisodesInput, partial(import_episodes, embedder=ctx.embedder)),
        ],
        max_workers=MAX_WORKERS,
    )

    # write_episode answers every outcome, refusals included, as a WriteEpisodeResult.
    @router.subscriber(subscribe_pattern(SERVICE, "write_episode"), queue=queue_group(SERVICE), max_workers=MAX_WORKERS)
    async def on_write_episode(request: Request, org: str = Path()) -> Reply:
        result = await handle_write_episode(ctx, org, request)
        if result.stored:
            relay.kick(org)
        return Reply.success(result)

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
