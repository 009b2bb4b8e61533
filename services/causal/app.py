"""The causal service's route: trace_cause, in the one transaction the runtime opens per request.

trace_cause only reads; the transaction is an ordinary one, so nothing but the code keeps it from
writing.
"""

from __future__ import annotations

from echo_memory.libs.core.contracts.causal import TraceCauseInput, TraceCauseResult
from echo_memory.libs.core.contracts.verbs import TRACE_CAUSE
from echo_memory.libs.server.service.context import RequestContext, ServiceContext
from echo_memory.libs.server.service.routes import Route, Routes
from echo_memory.services.causal.trace import trace_cause


def routes(ctx: ServiceContext) -> Routes:
    ctx.model()  # a topic is found by embedding it: refuse to start without the model
    return [Route(TRACE_CAUSE, handle_trace_cause)]


async def handle_trace_cause(rc: RequestContext, args: TraceCauseInput) -> TraceCauseResult:
    """Ordered cause→effect chains for the topic."""
    return await trace_cause(rc.conn, rc.caller, args, embedder=rc.embedder)
