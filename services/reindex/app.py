"""The reindex service: rebuilds embeddings, lexical statistics and the AGE graph mirror; reports
their freshness. Its background task keeps the mirror in sync from the fact events (mirror_consumer.py)."""

from __future__ import annotations

from echo_memory.libs.core.contracts.reindex import LexicalStatusInput, LexicalStatusResult, ReindexInput, ReindexResult
from echo_memory.libs.core.contracts.verbs import LEXICAL_STATUS, REINDEX
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.service.context import RequestContext, ServiceContext
from echo_memory.libs.server.service.routes import Route, Routes
from echo_memory.services.reindex.mirror_consumer import GraphMirrorConsumer
from echo_memory.services.reindex.rebuild import lexical_status, reindex


def routes(ctx: ServiceContext) -> Routes:
    # The model loads at the first re-embedding: freshness checks need only its name.
    mirror = GraphMirrorConsumer(ctx)
    ctx.on_start = mirror.run
    ctx.extra["graph_mirror"] = mirror
    return [Route(REINDEX, handle_reindex), Route(LEXICAL_STATUS, handle_lexical_status)]


async def handle_reindex(rc: RequestContext, args: ReindexInput) -> ReindexResult:
    """One rebuild step for the requested scope: lexical statistics, a page of embeddings, or the graph mirror."""
    return await reindex(rc.conn, rc.caller, args, embedder=await rc.service.load_model())


async def handle_lexical_status(rc: RequestContext, args: LexicalStatusInput) -> LexicalStatusResult:
    """How fresh the lexical statistics and embeddings are, against this process's model."""
    return await lexical_status(rc.conn, rc.caller, args, model=MiniLM.name)
