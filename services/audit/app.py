"""The audit service's subscribers: get_audit_log, why, export, import_stage, import.

Each request runs in one transaction (`ctx.handle`); an import is restored in the transaction of
its `import` request, so it commits whole or not at all.
"""

from __future__ import annotations

from faststream import Path
from faststream.nats import NatsRouter

from libs.bus.service import ServiceContext
from libs.contracts.audit import ExportInput, GetAuditLogInput, ImportInput, ImportStageInput, WhyInput
from libs.contracts.bus import Reply, Request
from libs.contracts.subjects import queue_group, subscribe_pattern
from services.audit.export import export_page
from services.audit.importer import import_restore, import_stage
from services.audit.log import get_audit_log
from services.audit.why import why

SERVICE = "audit"


def build_router(ctx: ServiceContext) -> NatsRouter:
    router = NatsRouter()
    queue = queue_group(SERVICE)

    @router.subscriber(subscribe_pattern(SERVICE, "get_audit_log"), queue=queue)
    async def on_get_audit_log(request: Request, org: str = Path()) -> Reply:
        return await ctx.handle(org, request, GetAuditLogInput, get_audit_log)

    @router.subscriber(subscribe_pattern(SERVICE, "why"), queue=queue)
    async def on_why(request: Request, org: str = Path()) -> Reply:
        return await ctx.handle(org, request, WhyInput, why)

    @router.subscriber(subscribe_pattern(SERVICE, "export"), queue=queue)
    async def on_export(request: Request, org: str = Path()) -> Reply:
        return await ctx.handle(org, request, ExportInput, export_page)

    @router.subscriber(subscribe_pattern(SERVICE, "import_stage"), queue=queue)
    async def on_import_stage(request: Request, org: str = Path()) -> Reply:
        return await ctx.handle(org, request, ImportStageInput, import_stage)

    @router.subscriber(subscribe_pattern(SERVICE, "import"), queue=queue)
    async def on_import(request: Request, org: str = Path()) -> Reply:
        return await ctx.handle(org, request, ImportInput, import_restore)

    return router
