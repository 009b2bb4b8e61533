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
from echo_memory.libs.server.service.context import RequestContext, ServiceContext
from echo_memory.libs.server.service.routes import Route, on_connection
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


def routes(ctx: ServiceContext) -> list[Route]:
    relay = OutboxRelay(ctx)
    ctx.on_start = relay.run
    ctx.extra["relay"] = relay
    ctx.model()  # the writes service embeds facts: refuse to start without the model
    changed = relay.kick
    return [
        Route("write_episode", handle_write_episode, changed, observe=write_counter(ctx)),
        Route("record_recall_save", on_connection(recall.record_recall_save), changed),
        Route("register_documents", on_connection(documents.register_documents), changed),
        Route("pending_documents", on_connection(documents.pending_documents)),
        Route("mark_ingested", on_connection(documents.mark_ingested), changed),
        Route("token_create", on_connection(admin.token_create)),
        Route("token_verify", on_connection(admin.token_verify)),
        Route("token_list", on_connection(admin.token_list)),
        Route("token_revoke", on_connection(admin.token_revoke)),
        Route("scope_create", on_connection(admin.scope_create)),
        Route("token_grant", on_connection(admin.token_grant)),
        Route("scope_list", on_connection(admin.scope_list)),
        Route("scope_show", on_connection(admin.scope_show)),
        Route("scope_delete", on_connection(admin.scope_delete)),
        Route("status", on_connection(admin.status)),
        Route("import_episodes", handle_import_episodes),
        Route("calibrate", handle_calibrate),
        Route("pending_episodes", on_connection(distil.pending_episodes)),
        Route("mark_distilled", on_connection(distil.mark_distilled), changed),
        Route("unhinted_facts", on_connection(post_hoc.unhinted_facts)),
        Route("add_causal_hints", on_connection(post_hoc.add_causal_hints), changed),
        Route("clear_post_hoc", on_connection(post_hoc.clear_post_hoc), changed),
        Route("forget", on_connection(forget.forget)),
        Route("forget_finish", forget.forget_finish),
        Route("forget_log", on_connection(forget.forget_log)),
        Route("entity_deferred", on_connection(identity_admin.entity_deferred)),
        Route("entity_merge", on_connection(identity_admin.entity_merge)),
        Route("entity_unmerge", on_connection(identity_admin.entity_unmerge)),
        Route("entity_rename", on_connection(identity_admin.entity_rename)),
        Route("end_facts", on_connection(end_facts.end_facts), changed),
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
