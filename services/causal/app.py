"""The causal service's subscriber: trace_cause, one read transaction per request."""

from __future__ import annotations

from functools import partial

from faststream import Path
from faststream.nats import NatsRouter

from libs.bus.service import ServiceContext
from libs.contracts.bus import Reply, Request
from libs.contracts.causal import TraceCauseInput
from libs.contracts.subjects import queue_group, subscribe_pattern
from services.causal.trace import trace_cause

SERVICE = "causal"


def build_router(ctx: ServiceContext) -> NatsRouter:
    router = NatsRouter()

    @router.subscriber(subscribe_pattern(SERVICE, "trace_cause"), queue=queue_group(SERVICE))
    async def on_trace_cause(request: Request, org: str = Path()) -> Reply:
        assert ctx.embedder is not None, "the causal service loads the embedder (libs/bus/registry.py)"
        return await ctx.handle(org, request, TraceCauseInput, partial(trace_cause, embedder=ctx.embedder))

    return router
