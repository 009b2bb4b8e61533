"""The audit verbs' access checks, all decided by `echo_memory.libs.server.store.access`.

`get_audit_log` and `why` span every scope the caller may read; export and import move a whole
org's memory and are for the admin identity only.
"""

from __future__ import annotations

import psycopg

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.server.store.access import Scope, accessible_scopes, require_admin

__all__ = ["readable_scopes", "require_admin"]


async def readable_scopes(conn: psycopg.AsyncConnection, caller: Caller) -> list[Scope]:
    """Every scope `caller` may read, oldest first (empty when it may read none)."""
    return await accessible_scopes(conn, caller, "read")
