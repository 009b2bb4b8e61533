"""The audit service's routes: get_audit_log, why, export, import_stage, import, health, and the dashboard's reads.

Each request runs in one transaction; an import is restored in the transaction of its `import`
request, so it commits whole or not at all.
"""

from __future__ import annotations

from echo_memory.libs.core.contracts.verbs import (
    AUDIT_EXPORT,
    AUDIT_IMPORT,
    AUDIT_IMPORT_STAGE,
    DASHBOARD_GRAPH,
    ENTITY_FACTS,
    GET_AUDIT_LOG,
    HEALTH,
    RECALL_COST,
    WHY,
)
from echo_memory.libs.server.service.context import ServiceContext
from echo_memory.libs.server.service.routes import Route, Routes, on_connection
from echo_memory.services.audit.dashboard import dashboard_graph, entity_facts, recall_cost
from echo_memory.services.audit.export import export_page
from echo_memory.services.audit.health import health
from echo_memory.services.audit.importer import import_restore, import_stage
from echo_memory.services.audit.log import get_audit_log
from echo_memory.services.audit.why import why


def routes(ctx: ServiceContext) -> Routes:
    return [
        Route(GET_AUDIT_LOG, on_connection(get_audit_log)),
        Route(WHY, on_connection(why)),
        Route(AUDIT_EXPORT, on_connection(export_page)),
        Route(AUDIT_IMPORT_STAGE, on_connection(import_stage)),
        Route(AUDIT_IMPORT, on_connection(import_restore)),
        Route(HEALTH, on_connection(health)),
        Route(DASHBOARD_GRAPH, on_connection(dashboard_graph)),
        Route(ENTITY_FACTS, on_connection(entity_facts)),
        Route(RECALL_COST, on_connection(recall_cost)),
    ]
