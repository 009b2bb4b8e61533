"""Every SQL statement of every service and of the store that touches a scoped table names scope_id.

The scan walks every module under `services/` and `libs/server/store/` (a new module is covered without
being listed), so a statement that would read or write across scopes is found, not reviewed.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import echo_memory.libs.server.store
import echo_memory.services
from echo_memory.libs.server.store.sql_files import SqlFile

SCOPED_TABLES = ("entities", "entity_aliases", "episodes", "facts", "lexical_stats", "lexical_df")
# Each exception says why a statement may ignore scopes.
EXCEPTIONS = {
    # Looked up by primary key to learn the row's scope, which the code then checks against the caller.
    "echo_memory.services.writes.recall.FACT_WITH_SCOPE",
    # Import (an org-wide admin verb) refuses a file whose ids already exist anywhere in the org.
    "echo_memory.services.audit.export_queries.IDS_TAKEN",
    # calibrate (an org-wide admin verb) grades entity resolution on every scope's decisions.
    "echo_memory.services.writes.calibrate.CONFIRMED",
    "echo_memory.services.writes.calibrate.REJECTED",
    "echo_memory.services.writes.calibrate.ALIASES",
    # An imported turn's (source, external_id) is unique in the org (migration 0007): a turn is stored
    # once whatever scope it is sent to; the caller learns only how many were already there.
    "echo_memory.services.writes.batch_import.STORED_EXTERNAL",
    # A restore (an org-wide admin verb) builds indexes once only when the whole org holds no memory.
    "echo_memory.services.audit.restore_upkeep.ORG_HOLDS_MEMORY",
}
_SQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|WITH|DELETE)\b", re.I)


def _statements() -> list[tuple[str, str]]:
    found = []
    for package in (echo_memory.services, echo_memory.libs.server.store):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            for attr, value in vars(module).items():
                if attr.isupper() and isinstance(value, str) and _SQL.match(value):
                    found.append((f"{info.name}.{attr}", value))
                if isinstance(value, SqlFile):  # the named blocks of a .sql file beside the module
                    found.extend((f"{info.name}.{value.path.name}:{name}", text)
                                 for name, text in value.statements().items() if _SQL.match(text))
    return found


def test_statements_on_scoped_tables_filter_by_scope() -> None:
    statements = _statements()
    assert len(statements) > 100  # the scan found the SQL of every service, so an empty pass means nothing
    assert {where.split(".")[2] for where, _ in statements} >= {"writes", "retrieval", "causal", "audit", "reindex"}
    offenders = []
    for where, sql in statements:
        touches = any(re.search(rf"\b{table}\b", sql) for table in SCOPED_TABLES)
        if touches and "scope_id" not in sql and where not in EXCEPTIONS:
            offenders.append(where)
    assert offenders == []


def test_every_exception_still_exists_and_still_needs_to_be_one() -> None:
    statements = dict(_statements())
    for where in EXCEPTIONS:
        assert where in statements, f"{where} is gone: drop it from EXCEPTIONS"
    assert "f.scope_id" in statements["echo_memory.services.writes.recall.FACT_WITH_SCOPE"]
