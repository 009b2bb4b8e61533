"""Session-wide real servers: embedded Postgres (pgvector) and nats-server with JetStream, for
tests/ and lab/tests/ alike.

Each test gets a fresh database cloned from a migrated template (tens of milliseconds), and a
fresh org name so its subjects and rows never meet another test's.

Tests marked `datasets` read the research datasets (lab/datasets.py: `$ECHO_DATASETS_DIR`, else
`../shared/datasets` beside the repository) through the `datasets` fixture. When that folder is
absent they are deselected, not skipped, and one line says how many and why.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from echo_memory.libs.local.supervisor.nats import NatsServer
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.local.supervisor.postgres import EmbeddedPostgres
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.store.schema import apply_migrations
from echo_memory.libs.testing import EchoStack, server_dir
from echo_memory.libs.testing.tiers import Handlers, rolled_back
from lab.datasets import ENV as DATASETS_ENV
from lab.datasets import datasets_dir

TEMPLATE = "echo_template"


# Async tests run on the event loop the product runs on (libs/server/eventloop.py): pytest-asyncio makes
# its loops from the current policy. (Its loop-factory hook would parametrize the async tests and
# so reorder them; tests/e2e/test_up.py relies on file order.)
try:
    import uvloop
except ImportError:  # no uvloop on this platform: the product runs asyncio's loop too
    uvloop = None
if uvloop is not None:
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without the datasets folder, deselect every test marked `datasets` and say so in one line."""
    folder = datasets_dir()
    if folder.is_dir():
        return
    needing = [item for item in items if item.get_closest_marker("datasets") is not None]
    if not needing:
        return
    items[:] = [item for item in items if item.get_closest_marker("datasets") is None]
    config.hook.pytest_deselected(items=needing)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    line = (f"deselected {len(needing)} test(s) marked `datasets`: no datasets folder at {folder} "
            f"(set {DATASETS_ENV} to where agent-facts/, locomo/ and madial_bench/ are)")
    if reporter is not None:
        reporter.write_line(line)


@pytest.fixture
def datasets(request: pytest.FixtureRequest) -> Path:
    """The datasets folder, for a test marked `datasets` (so that it is deselected without it)."""
    if request.node.get_closest_marker("datasets") is None:
        pytest.fail("a test that reads the datasets folder must be marked @pytest.mark.datasets")
    return datasets_dir()


class PostgresFixture:
    def __init__(self, server: EmbeddedPostgres) -> None:
        self.server = server

    @property
    def dsn(self) -> str:
        return self.server.url("postgres")

    def admin_url(self, dbname: str) -> str:
        return self.server.url(dbname)


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see the developer's ECHO_MEMORY_* settings."""
    for key in list(os.environ):
        if key.startswith("ECHO_MEMORY_") or key == "OTEL_EXPORTER_OTLP_ENDPOINT":
            monkeypatch.delenv(key)


@pytest.fixture(scope="session")
def pg() -> Iterator[PostgresFixture]:
    base = server_dir("pg")
    server = EmbeddedPostgres(base, free_port(), durable=False)
    server.start()
    with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
    apply_migrations(server.url(TEMPLATE))
    yield PostgresFixture(server)
    server.stop()
    shutil.rmtree(base, ignore_errors=True)


@contextmanager
def _database(pg: PostgresFixture, name: str, template: str | None) -> Iterator[str]:
    """A new database `name` (a copy of `template`, else empty), dropped on exit; its admin URL."""
    copy = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    try:
        yield pg.admin_url(name)
    finally:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
def database_url(pg: PostgresFixture, request: pytest.FixtureRequest) -> Iterator[str]:
    name = "t_" + re.sub(r"\W", "_", request.node.name.lower())[:40] + "_" + uuid.uuid4().hex[:6]
    with _database(pg, name, TEMPLATE) as url:
        yield url


@pytest.fixture
def empty_database_url(pg: PostgresFixture) -> Iterator[str]:
    """A database with no schema at all (for migration tests)."""
    with _database(pg, "e_" + uuid.uuid4().hex[:10], None) as url:
        yield url


@pytest.fixture(scope="session")
def nats_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = NatsServer(tmp_path_factory.mktemp("nats"), free_port())
    server.start()
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def embedder() -> MiniLM:
    return MiniLM()


@pytest.fixture
def org() -> str:
    return "t-" + uuid.uuid4().hex[:10]


@pytest.fixture
async def stack(database_url: str, nats_url: str, org: str, embedder: MiniLM) -> AsyncIterator[EchoStack]:
    """Every service plus the HTTP edge, in-process, for one test."""
    async with EchoStack(database_url=database_url, nats_url=nats_url, org=org, embedder=embedder) as running:
        yield running


@pytest.fixture(scope="session")
def tier_database_url(pg: PostgresFixture) -> Iterator[str]:
    """One migrated database for the whole session, for tests that roll back everything they write."""
    with _database(pg, "tier_" + uuid.uuid4().hex[:8], TEMPLATE) as url:
        yield url


@pytest.fixture
async def handlers(tier_database_url: str, org: str, embedder: MiniLM) -> AsyncIterator[Handlers]:
    """Every service's handlers on one transaction that is rolled back after the test (libs/testing/tiers.py)."""
    async with rolled_back(tier_database_url) as conn:
        yield Handlers(conn, org, embedder)


@pytest.fixture(scope="session")
def spans() -> InMemorySpanExporter:
    """Every span of the test session, recorded in memory (installed before any broker is made)."""
    return _SPANS


from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from echo_memory.libs.server.telemetry import export_spans_to, setup_tracing  # noqa: E402

_SPANS = InMemorySpanExporter()
export_spans_to(SimpleSpanProcessor(_SPANS))
setup_tracing("tests")  # the test process's own spans (the MCP client, the in-process edge)
