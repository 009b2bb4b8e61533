"""The retrieval service's route: query_memory, with its read log in the request's transaction."""

from __future__ import annotations

from echo_memory.libs.core.contracts.query import QueryMemoryInput, QueryMemoryResult
from echo_memory.libs.core.contracts.verbs import QUERY_MEMORY
from echo_memory.libs.server.service.context import RequestContext, ServiceContext
from echo_memory.libs.server.service.routes import Route, Routes
from echo_memory.services.retrieval import recall_cost
from echo_memory.services.retrieval.search import query_memory


def routes(ctx: ServiceContext) -> Routes:
    ctx.model()  # queries are embedded: refuse to start without the model
    settings = ctx.settings.retrieval  # built once at the entry point (ECHO_MEMORY_RETRIEVAL__*)

    async def handle_query_memory(rc: RequestContext, args: QueryMemoryInput) -> QueryMemoryResult:
        """Ranked facts (and evidence) for the query; the side channels run on a second connection.

        Its cost (facts and tokens returned, a full dump's tokens, channels used) goes on the span
        and into the metrics.
        """
        result = await query_memory(rc.conn, rc.caller, args, rc.embedder, settings=settings, side=rc.reader)
        await recall_cost.record(rc.conn, rc.caller, result, ctx.metrics)
        return result

    return [Route(QUERY_MEMORY, handle_query_memory)]
