"""``echo-memory`` as the previous release's image runs it: this CLI, knowing every migration but the newest.

The Helm upgrade test runs a pre-install hook Job's command with it, so the release it then upgrades
left the database one schema version behind, as an older image would have.
"""

from __future__ import annotations

import sys

from echo_memory.libs.server.store import schema
from echo_memory.libs.server.store.migrations import all_migrations

PREVIOUS = all_migrations()[:-1]
schema.all_migrations = lambda: PREVIOUS  # type: ignore[attr-defined]
schema.CODE_SCHEMA_VERSION = PREVIOUS[-1].version  # type: ignore[attr-defined]

from echo_memory.libs.local.cli.main import main  # noqa: E402 (after the patch, so init-db sees the older migration set)

if __name__ == "__main__":
    sys.exit(main())
