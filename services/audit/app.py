"""The audit service's routes: get_audit_log, why, export, import_stage, import, health, and the dashboard's reads.

Each request runs in one transaction; an import is restored in the transaction of its `import`
request, so it commits whole or not at all.
"""

from __future__ import annotations

from echo_memory.libs.server.service.context import ServiceContext
from echo_memory.libs.server.service.routes import Route, on_connection
from echo_memory.services.audit.dashboard import dashboard_graph, entity_facts, recall_cost
from echo_memory.services.audit.export import export_page
from echo_memory.services.audit.health import health
from echo_memory.services.audit.importer import import_restore, import_stage
from echo_memory.services.audit.log import get_audit_log
from echo_memory.services.audit.why import why


def routes(ctx: ServiceContext) -> list[Route]:
    return [
        Route("get_audit_log", on_connection(get_audit_log)),
        Route("why", on_connection(why)),
        Route("export", on_connection(export_page)),
        Route("import_stage", on_connection(import_stage)),
        Route("import", on_connection(import_restore)),
        Route("health", on_connection(health)),
        Route("dashboard_graph", on_connection(dashboard_graph)),
        Route("entity_facts", on_connection(entity_facts)),
        Route("recall_cost", on_connection(recall_cost)),
    ]
