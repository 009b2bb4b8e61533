"""What the service's background tasks do when a step fails: log it, count it, record it."""

from __future__ import annotations

import logging

from echo_memory.libs.server.service.context import ServiceContext
from echo_memory.libs.server.service.errors import as_echo_error

log = logging.getLogger(__name__)

AGENT = "consolidation"  # the actor the service's own runs and copies are recorded under
RECORD_FAILURE = """
INSERT INTO consolidation_failures (scope_id, actor, code, message)
VALUES (%(scope_id)s, %(actor)s, %(code)s, %(message)s)
"""


async def record_failure(ctx: ServiceContext, org: str, scope_id: str | None, what: str, exc: Exception) -> None:
    """Log, count (`failed`) and record `exc`, raised by `what` in `org` (and scope `scope_id`), so
    `health` sees it.

    The record has a transaction of its own: the failed step's was rolled back. When the database
    cannot take it either, the log line and the counter are what remains.
    """
    error = as_echo_error(exc, ctx.name)
    where = f"org {org}" + (f" scope {scope_id}" if scope_id else "")
    log.warning("consolidation: %s of %s failed: %s", what, where, error.message)
    ctx.metrics.consolidation.labels("failed").inc()
    try:
        async with ctx.databases.transaction(org) as conn:
            await conn.execute(RECORD_FAILURE, {"scope_id": scope_id, "actor": AGENT, "code": error.code,
                                                "message": error.message})
    except Exception as again:  # noqa: BLE001 - the failure is already logged and counted
        log.warning("consolidation could not record the failed %s of %s: %s", what, where,
                    as_echo_error(again, ctx.name).message)
