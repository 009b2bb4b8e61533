"""Fixtures for the audit tests: a second org (database registered on the same bus) for imports."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest

from echo_memory.libs.server.orgs import register_org, unregister_org


@pytest.fixture
def second_org(pg: Any, nats_url: str, request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(org, database_url): a fresh migrated database registered as a second org on the same bus,
    so the running services serve it too (they look unknown orgs up in the NATS KV registry)."""

    name = "i_" + re.sub(r"\W", "_", request.node.name.lower())[:30] + "_" + uuid.uuid4().hex[:6]
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "echo_template"')
    org = "imp-" + uuid.uuid4().hex[:8]
    url = pg.admin_url(name)
    yield org, url
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')

@pytest.fixture
async def registered_second_org(second_org: tuple[str, str], nats_url: str) -> AsyncIterator[tuple[str, str]]:
    org, url = second_org
    await register_org(nats_url, org, url)
    yield org, url
    await unregister_org(nats_url, org)
