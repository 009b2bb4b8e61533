"""Consolidation is not built yet: the service runs and answers with a typed `not_built` error."""

from faststream.nats import NatsRouter

from libs.bus.service import ServiceContext, not_built_router

SERVICE = "consolidation"


def build_router(ctx: ServiceContext) -> NatsRouter:
    return not_built_router(SERVICE, ("consolidate",), "no issue filed yet")
