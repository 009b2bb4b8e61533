"""The writes service's routes: every verb that changes memory, one transaction per request.

Every verb that commits outbox rows wakes the outbox relay (relay.py) once it has committed; the
relay also runs on a timer as the service's background task.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.core.contracts.calibration import CalibrateInput, CalibrateResult
from echo_memory.libs.core.contracts.imports import ImportEpisodesInput, ImportEpisodesResult
from echo_memory.libs.core.contracts.write import WriteEpisodeInput, WriteEpisodeResult
from echo_memory.libs.core.contracts.verbs import (
    ADD_CAUSAL_HINTS, CALIBRATE, CLEAR_POST_HOC, END_FACTS, ENTITY_DEFERRED, ENTITY_MERGE, ENTITY_RENAME,
    ENTITY_UNMERGE, FORGET, FORGET_FINISH, FORGET_LOG, IMPORT_EPISODES, MARK_DISTILLED, MARK_INGESTED,
    PENDING_DOCUMENTS, PENDING_EPISODES, RECORD_RECALL_SAVE, REGISTER_DOCUMENTS, SCOPE_CREATE, SCOPE_DELETE,
    SCOPE_LIST, SCOPE_SHOW, STATUS, TOKEN_CREATE, TOKEN_GRANT, TOKEN_LIST, TOKEN_REVOKE, TOKEN_VERIFY,
    UNHINTED_FACTS, WRITE_EPISODE,
)
from echo_memory.libs.server.service.context import RequestContext, ServiceContext
from echo_memory.libs.server.service.routes import Route, Routes, on_connection
from echo_memory.libs.server.telemetry import steps
from echo_memory.services.writes import (
    admin,
    calibrate,
    distil,
    documents,
    end_facts,
    forget,
    identity_admin,
    idempotency,
    post_hoc,
    recall,
)
from echo_memory.services.writes.batch_import import import_episodes
from echo_memory.services.writes.episode import write_episode
from echo_memory.services.writes.relay import OutboxRelay


def routes(ctx: ServiceContext) -> Routes:
    relay = OutboxRelay(ctx)
    ctx.on_start = relay.run
    ctx.extra["relay"] = relay
    ctx.model()  # the writes service embeds facts: refuse to start without the model
    changed = relay.kick
    return [
        Route(WRITE_EPISODE, handle_write_episode, changed, observe=write_counter(ctx)),
        Route(RECORD_RECALL_SAVE, on_connection(recall.record_recall_save), changed),
        Route(REGISTER_DOCUMENTS, on_connection(documents.register_documents), changed),
        Route(PENDING_DOCUMENTS, on_connection(documents.pending_documents)),
        Route(MARK_INGESTED, on_connection(documents.mark_ingested), changed),
        Route(TOKEN_CREATE, on_connection(admin.token_create)),
        Route(TOKEN_VERIFY, on_connection(admin.token_verify)),
        Route(TOKEN_LIST, on_connection(admin.token_list)),
        Route(TOKEN_REVOKE, on_connection(admin.token_revoke)),
        Route(SCOPE_CREATE, on_connection(admin.scope_create)),
        Route(TOKEN_GRANT, on_connection(admin.token_grant)),
        Route(SCOPE_LIST, on_connection(admin.scope_list)),
        Route(SCOPE_SHOW, on_connection(admin.scope_show)),
        Route(SCOPE_DELETE, on_connection(admin.scope_delete)),
        Route(STATUS, on_connection(admin.status)),
        Route(IMPORT_EPISODES, handle_import_episodes),
        Route(CALIBRATE, handle_calibrate),
        Route(PENDING_EPISODES, on_connection(distil.pending_episodes)),
        Route(MARK_DISTILLED, on_connection(distil.mark_distilled), changed),
        Route(UNHINTED_FACTS, on_connection(post_hoc.unhinted_facts)),
        Route(ADD_CAUSAL_HINTS, on_connection(post_hoc.add_causal_hints), changed),
        Route(CLEAR_POST_HOC, on_connection(post_hoc.clear_post_hoc), changed),
        Route(FORGET, on_connection(forget.forget)),
        Route(FORGET_FINISH, forget.forget_finish),
        Route(FORGET_LOG, on_connection(forget.forget_log)),
        Route(ENTITY_DEFERRED, on_connection(identity_admin.entity_deferred)),
        Route(ENTITY_MERGE, on_connection(identity_admin.entity_merge)),
        Route(ENTITY_UNMERGE, on_connection(identity_admin.entity_unmerge)),
        Route(ENTITY_RENAME, on_connection(identity_admin.entity_rename)),
        Route(END_FACTS, on_connection(end_facts.end_facts), changed),
    ]


def write_counter(ctx: ServiceContext) -> Callable[[Caller, BaseModel | None, EchoError | None], None]:
    """Count each answered write_episode by outcome and reason, and the facts it stored by agent."""
    metrics = ctx.metrics
    for outcome, reason in WRITE_OUTCOMES:
        metrics.writes.labels(outcome, reason)

    def observe(caller: Caller, result: BaseModel | None, error: EchoError | None) -> None:
        if error is not None:
            metrics.writes.labels("refused", error.code).inc()
            return
        assert isinstance(result, WriteEpisodeResult)
        outcome, reason = write_outcome(result)
        metrics.writes.labels(outcome, reason).inc()
        if result.edges_created:
            metrics.facts_written.labels(caller.agent_id).inc(len(result.edges_created))

    return observe


# Every (outcome, reason) of an answered write; a refusal's reason is its error code.
WRITE_OUTCOMES = (("stored", "none"), ("partial", "deferred_mention"), ("deferred", "near_match"),
                  ("unchanged", "restated"), ("no_facts", "no_facts"))
_REASON = dict(WRITE_OUTCOMES)


def write_outcome(result: WriteEpisodeResult) -> tuple[str, str]:
    """(outcome, reason) of a write that was answered: why nothing, or not everything, was stored."""
    if result.stored:
        return ("partial", "deferred_mention") if result.partial else ("stored", "none")
    outcome = result.not_stored or "unchanged"
    return outcome, _REASON.get(outcome, outcome)


async def handle_write_episode(rc: RequestContext, args: WriteEpisodeInput) -> WriteEpisodeResult:
    """The stored outcome (stored, deferred, unchanged, no_facts); a refusal raises a typed error.

    The idempotency check, the write and remembering the response share one transaction, so a
    retried key either sees the committed first response or waits for it.
    """
    if args.idempotency_key:
        with steps.step("idempotency"):
            earlier = await idempotency.lookup(rc.conn, rc.caller, args)
        if earlier is not None:
            return earlier
    result = await write_episode(rc.conn, rc.caller, args, rc.embedder)
    if args.idempotency_key:
        with steps.step("idempotency"):
            await idempotency.remember(rc.conn, rc.caller, args, result)
    return result


async def handle_import_episodes(rc: RequestContext, args: ImportEpisodesInput) -> ImportEpisodesResult:
    """Raw turns and documents stored as searchable episodes, embedded in batches."""
    return await import_episodes(rc.conn, rc.caller, args, embedder=rc.embedder)


async def handle_calibrate(rc: RequestContext, args: CalibrateInput) -> CalibrateResult:
    """Resolution AUC, its interval and deferral precision; thresholds recorded only when asked and sound."""
    return await calibrate.calibrate(rc.conn, rc.caller, args, embedder=rc.embedder)
