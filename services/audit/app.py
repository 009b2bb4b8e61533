"""The audit service's subscribers: get_audit_log, why, export, import_stage, import.

Each request runs in one transaction (`ctx.handle`); an import is restored in the transaction of
its `import` request, so it commits whole or not at all.
"""

from __future__ import annotations

from faststream.nats import NatsRouter

from libs.bus.service import Route, ServiceContext, route_router
from libs.contracts.audit import ExportInput, GetAuditLogInput, ImportInput, ImportStageInput, WhyInput
from services.audit.export import export_page
from services.audit.importer import import_restore, import_stage
from services.audit.log import get_audit_log
from services.audit.why import why

SERVICE = "audit"


def build_router(ctx: ServiceContext) -> NatsRouter:
    return route_router(
        ctx,
        SERVICE,
        [
            Route("get_audit_log", GetAuditLogInput, get_audit_log),
            Route("why", WhyInput, why),
            Route("export", ExportInput, export_page),
            Route("import_stage", ImportStageInput, import_stage),
            Route("import", ImportInput, import_restore),
        ],
    )
