"""Consolidation: tiers, digests and the session brief; demotes, never deletes, needs no model.

Verbs (admin identity, except `brief`, which any reader may ask for the scopes it may read):
`consolidate` (one scope or all, or a dry run), `consolidate_log`, `consolidate_undo`, `brief`.
Abstracts by the user's own model (abstracts.py; any caller, by its own scope rights):
`abstract_candidates` and `write_abstract` need write access to the digest's scope,
`digest_abstracts` read access.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from pydantic import BaseModel

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.consolidation import (
    AbstractCandidatesInput,
    AbstractCandidatesResult,
    BriefInput,
    BriefResult,
    ConsolidateInput,
    ConsolidateLogInput,
    ConsolidateLogResult,
    ConsolidateResult,
    ConsolidateUndoInput,
    ConsolidateUndoResult,
    DigestAbstractsInput,
    DigestAbstractsResult,
    ScopeRun,
    WriteAbstractInput,
    WriteAbstractResult,
)
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.core.contracts.identity import require_admin
from echo_memory.libs.core.contracts.verbs import (
    ABSTRACT_CANDIDATES,
    BRIEF,
    CONSOLIDATE,
    CONSOLIDATE_LOG,
    CONSOLIDATE_UNDO,
    DIGEST_ABSTRACTS,
    WRITE_ABSTRACT,
)
from echo_memory.libs.server.service.context import RequestContext, ServiceContext
from echo_memory.libs.server.service.routes import Handler, Route, Routes
from echo_memory.services.consolidation import abstracts, brief, runs
from echo_memory.services.consolidation.hot_copy import COPIED, HotCopy
from echo_memory.services.consolidation.scheduler import Scheduler
from echo_memory.services.consolidation.worker import RunJob, RunProcess

ACTION = "run, list or undo consolidation"
REFUSALS = ("invalid_argument", "not_found", "scope_denied", "unauthenticated")


def routes(ctx: ServiceContext) -> Routes:
    process = RunProcess(ctx.databases)
    ctx.on_stop = process.close
    copy = HotCopy(ctx)
    tasks: list[Callable[[], Awaitable[None]]] = [copy.run]
    ctx.extra["hot_copy"] = copy
    if ctx.settings.consolidation.auto:
        scheduler = Scheduler(ctx, process, orgs=copy.orgs)  # the orgs its events name get copies too
        tasks.append(scheduler.run)
        ctx.extra["scheduler"] = scheduler
    ctx.on_start = _all_of(tasks)
    for outcome in (*runs.OUTCOMES, COPIED):  # present from the start: a dashboard reads 0 rather than nothing
        ctx.metrics.consolidation.labels(outcome)
    return [
        # A run takes minutes at a million facts, in its own process and transaction: the request
        # waiting for it holds none open.
        Route(CONSOLIDATE, consolidate_in(process), observe=_count_run(ctx), transaction=False),
        Route(CONSOLIDATE_LOG, handle_log),
        Route(CONSOLIDATE_UNDO, handle_undo),
        Route(BRIEF, handle_brief),
        Route(ABSTRACT_CANDIDATES, handle_abstract_candidates),
        Route(WRITE_ABSTRACT, handle_write_abstract),
        Route(DIGEST_ABSTRACTS, handle_digest_abstracts),
    ]


def _all_of(tasks: list[Callable[[], Awaitable[None]]]) -> Callable[[], Awaitable[None]]:
    """One background task running `tasks` side by side; cancelling it cancels them all."""

    async def run() -> None:
        await asyncio.gather(*(task() for task in tasks))

    return run


def consolidate_in(process: RunProcess) -> Handler[ConsolidateInput, ConsolidateResult]:
    """The `consolidate` handler, its runs done in `process`."""

    async def handle_consolidate(rc: RequestContext, args: ConsolidateInput) -> ConsolidateResult:
        """Place every fact of the scope (or of every scope) in its tier and rebuild its digests,
        one transaction per scope, in the service's run process.

        A dry run computes the same counts and writes nothing. NotFound for an unknown scope;
        ScopeDenied unless the caller is the admin identity; Unavailable when the run process died.
        """
        require_admin(rc.caller, ACTION)
        done: list[ScopeRun] = []
        for scope in await runs.scopes_to_run(rc.conn, args.scope):
            job = RunJob(caller=rc.caller, scope_id=scope.id, scope_name=scope.name,
                         policy=rc.settings.consolidation, dry_run=args.dry_run)
            try:
                outcome = await process.run(rc.org, job)
            except EchoError as exc:
                if done:  # committed runs stay: say which, so the caller knows what the error left
                    exc.message = (f"{exc.message} (while running scope {scope.name}; the runs of "
                                   f"{', '.join(r.scope for r in done)} were committed: see `consolidate log`)")
                raise
            if outcome.run is not None:
                done.append(outcome.run)
        return ConsolidateResult(dry_run=args.dry_run, runs=done)

    return handle_consolidate


async def handle_log(rc: RequestContext, args: ConsolidateLogInput) -> ConsolidateLogResult:
    """The newest runs, newest first (empty when none ran); NotFound for an unknown scope."""
    require_admin(rc.caller, ACTION)
    scope = (await runs.scopes_to_run(rc.conn, args.scope))[0] if args.scope else None
    return ConsolidateLogResult(runs=await runs.run_log(rc.conn, scope, args.limit))


async def handle_undo(rc: RequestContext, args: ConsolidateUndoInput) -> ConsolidateUndoResult:
    require_admin(rc.caller, ACTION)
    return await runs.undo_run(rc.conn, rc.caller, args.run_id)


async def handle_brief(rc: RequestContext, args: BriefInput) -> BriefResult:
    return await brief.brief(rc.conn, rc.caller, args)


async def handle_abstract_candidates(rc: RequestContext, args: AbstractCandidatesInput) -> AbstractCandidatesResult:
    return await abstracts.candidates(rc.conn, rc.caller, args)


async def handle_write_abstract(rc: RequestContext, args: WriteAbstractInput) -> WriteAbstractResult:
    return await abstracts.write_abstract(rc.conn, rc.caller, args)


async def handle_digest_abstracts(rc: RequestContext, args: DigestAbstractsInput) -> DigestAbstractsResult:
    return await abstracts.list_abstracts(rc.conn, rc.caller, args)


def _count_run(ctx: ServiceContext) -> Callable[[Caller, BaseModel | None, EchoError | None], None]:
    """Counts every run's outcomes; a run that failed whole (not one refused for its arguments or
    its caller) counts once as `failed`, so a broken run never looks like a quiet one."""

    def observe(caller: Caller, result: BaseModel | None, error: EchoError | None) -> None:
        if isinstance(result, ConsolidateResult):
            if not result.dry_run:
                for run in result.runs:
                    runs.count_run(ctx.metrics.consolidation, run.counts)
        elif error is not None and error.code not in REFUSALS:
            ctx.metrics.consolidation.labels("failed").inc()

    return observe
