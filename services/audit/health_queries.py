"""The statements of `health`, read from health.sql by the name of each `-- name:` block."""

from __future__ import annotations

from pathlib import Path

from echo_memory.libs.server.store.sql_files import SqlFile

sql = SqlFile(Path(__file__).with_name("health.sql"))
statements = sql.statements
