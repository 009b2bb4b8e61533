"""The retrieval service's subscribers: query_memory (with its read log) and lexical status."""

from __future__ import annotations

from functools import partial

from faststream import Path
from faststream.nats import NatsRouter

from libs.bus.service import ServiceContext
from libs.contracts.bus import Reply, Request
from libs.contracts.query import QueryMemoryInput
from libs.contracts.subjects import queue_group, subscribe_pattern
from services.retrieval.search import query_memory
from services.retrieval.settings import RetrievalSettings

SERVICE = "retrieval"


def build_router(ctx: ServiceContext) -> NatsRouter:
    router = NatsRouter()
    settings = RetrievalSettings()  # read once per process (ECHO_MEMORY_LEXICAL_BM25, weights)

    @router.subscriber(subscribe_pattern(SERVICE, "query_memory"), queue=queue_group(SERVICE))
    async def on_query_memory(request: Request, org: str = Path()) -> Reply:
        assert ctx.embedder is not None
        return await ctx.handle(
            org, request, QueryMemoryInput,
            partial(query_memory, embedder=ctx.embedder, settings=settings, side=partial(ctx.databases.reader, org)),
        )

    return router
