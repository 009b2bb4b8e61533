"""Plain SQL migrations, applied in order by `echo-memory init-db`.

Each file is `NNNN_name.sql`; NNNN is the schema version it brings the database to.

Versions 0010 and 0011 were never shipped: a number is handed to a branch when work on it starts
and is never reused, and the two branches given these numbers shipped no migration. Migrations are
applied by version (every shipped one the database has not recorded, oldest first), so the gap
changes nothing. UNSHIPPED_VERSIONS lists every such number; a test keeps it true.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

_NAME_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


# Numbers below the newest migration that no shipped migration took (see above).
UNSHIPPED_VERSIONS: frozenset[int] = frozenset({10, 11})


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def all_migrations() -> list[Migration]:
    """Every migration shipped with this code, oldest first."""
    found = []
    for entry in resources.files(__name__).iterdir():
        match = _NAME_RE.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


CODE_SCHEMA_VERSION: int = all_migrations()[-1].version
