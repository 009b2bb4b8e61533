"""Consolidation is not built yet: the service runs and answers with a typed `not_built` error."""

from __future__ import annotations

from pydantic import BaseModel

from echo_memory.libs.core.contracts.errors import NotBuilt
from echo_memory.libs.server.service.context import RequestContext, ServiceContext
from echo_memory.libs.server.service.routes import Route


def routes(ctx: ServiceContext) -> list[Route]:
    return [Route("consolidate", handle_consolidate)]


async def handle_consolidate(rc: RequestContext, args: BaseModel) -> BaseModel:
    """Always raises `not_built`: tiers, temperature and summaries are not implemented."""
    raise NotBuilt("consolidate is not built yet; the consolidation service has no implementation")
