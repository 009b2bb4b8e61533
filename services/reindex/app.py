"""The reindex service: rebuilds embeddings and lexical statistics; reports their freshness."""

from __future__ import annotations

from libs.contracts.reindex import LexicalStatusInput, LexicalStatusResult, ReindexInput, ReindexResult
from libs.embed import MiniLM
from libs.service.context import RequestContext, ServiceContext
from libs.service.routes import Route
from services.reindex.rebuild import lexical_status, reindex


def routes(ctx: ServiceContext) -> list[Route]:
    # The model loads at the first re-embedding: freshness checks need only its name.
    return [Route("reindex", handle_reindex), Route("lexical_status", handle_lexical_status)]


async def handle_reindex(rc: RequestContext, args: ReindexInput) -> ReindexResult:
    """Embeddings and lexical statistics rebuilt for the requested scopes."""
    return await reindex(rc.conn, rc.caller, args, embedder=await rc.service.load_model())


async def handle_lexical_status(rc: RequestContext, args: LexicalStatusInput) -> LexicalStatusResult:
    """How fresh the lexical statistics and embeddings are, against this process's model."""
    return await lexical_status(rc.conn, rc.caller, args, model=MiniLM.name)
