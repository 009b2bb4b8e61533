"""The reindex service: rebuilds embeddings and lexical statistics; reports their freshness."""

from __future__ import annotations

from faststream import Path
from faststream.nats import NatsRouter

from libs.bus.service import ServiceContext
from libs.contracts.bus import Reply, Request
from libs.contracts.reindex import LexicalStatusInput, ReindexInput
from libs.contracts.subjects import queue_group, subscribe_pattern
from services.reindex.rebuild import lexical_status, reindex

SERVICE = "reindex"


def build_router(ctx: ServiceContext) -> NatsRouter:
    router = NatsRouter()
    queue = queue_group(SERVICE)

    @router.subscriber(subscribe_pattern(SERVICE, "reindex"), queue=queue)
    async def on_reindex(request: Request, org: str = Path()) -> Reply:
        assert ctx.embedder is not None
        return await ctx.handle(org, request, ReindexInput, lambda c, k, a: reindex(c, k, a, ctx.embedder))

    @router.subscriber(subscribe_pattern(SERVICE, "lexical_status"), queue=queue)
    async def on_lexical_status(request: Request, org: str = Path()) -> Reply:
        return await ctx.handle(org, request, LexicalStatusInput, lexical_status)

    return router
