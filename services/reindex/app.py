"""The reindex service: rebuilds embeddings and lexical statistics; reports their freshness."""

from __future__ import annotations

from functools import partial

from faststream.nats import NatsRouter

from libs.bus.service import Route, ServiceContext, route_router
from libs.contracts.reindex import LexicalStatusInput, ReindexInput
from services.reindex.rebuild import lexical_status, reindex

SERVICE = "reindex"


def build_router(ctx: ServiceContext) -> NatsRouter:
    assert ctx.embedder is not None, "reindex re-embeds, so it is started with the model"
    return route_router(
        ctx,
        SERVICE,
        [
            Route("reindex", ReindexInput, partial(reindex, embedder=ctx.embedder)),
            Route("lexical_status", LexicalStatusInput, partial(lexical_status, model=ctx.embedder.name)),
        ],
    )
