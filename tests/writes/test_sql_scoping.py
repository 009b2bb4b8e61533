"""Every SQL statement of the writes service that touches a scoped table names scope_id (checked, not reviewed)."""

from __future__ import annotations

import importlib
import re

SCOPED_TABLES = ("entities", "entity_aliases", "episodes", "facts", "lexical_stats", "lexical_df")
MODULES = ("queries", "entities", "recall", "documents", "relay", "idempotency")
# Looked up by primary key to learn the row's scope, which the code then checks against the caller.
BY_PRIMARY_KEY = {"recall.FACT_WITH_SCOPE"}
_SQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|WITH|DELETE)\b", re.I)


def _statements() -> list[tuple[str, str]]:
    found = []
    for name in MODULES:
        module = importlib.import_module(f"services.writes.{name}")
        for attr, value in vars(module).items():
            if attr.isupper() and isinstance(value, str) and _SQL.match(value):
                found.append((f"{name}.{attr}", value))
    return found


def test_statements_on_scoped_tables_filter_by_scope() -> None:
    statements = _statements()
    assert len(statements) > 20  # the scan found the SQL, so an empty pass means nothing
    offenders = []
    for where, sql in statements:
        touches = any(re.search(rf"\b{table}\b", sql) for table in SCOPED_TABLES)
        if touches and "scope_id" not in sql and where not in BY_PRIMARY_KEY:
            offenders.append(where)
    assert offenders == []


def test_the_primary_key_exceptions_still_return_the_scope() -> None:
    from services.writes import recall

    assert "f.scope_id" in recall.FACT_WITH_SCOPE
