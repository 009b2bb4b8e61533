"""Fixtures for the audit tests: every service on the in-memory broker, and a second org (database
registered on the same bus) for imports."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest

from echo_memory.libs.core.config import Settings
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.orgs import register_org, unregister_org
from echo_memory.libs.testing.agents import Routes, routed_services


@pytest.fixture
async def routes(database_url: str, org: str, embedder: MiniLM) -> AsyncIterator[Routes]:
    """Every service's routes on the in-memory broker, each request committing on the test's database."""
    async with routed_services(Settings(org=org), embedder=embedder, database_url=database_url) as running:
        yield running


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
