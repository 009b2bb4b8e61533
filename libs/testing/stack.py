"""EchoStack: the whole system for one test, in-process, over real NATS, Postgres and HTTP."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import SecretStr

from libs.bus.broker import make_broker
from libs.bus.client import BusClient
from libs.bus.registry import SERVICES
from libs.bus.service import RunningService, start_service
from libs.config import Settings
from libs.contracts.bus import Caller
from libs.embed import MiniLM
from libs.store import admin
from libs.supervisor.ports import free_port


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
    ) -> None:
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
        )
        self.running: dict[str, RunningService] = {}
        self.edge: Any = None
        self._admin_broker: Any = None

    async def __aenter__(self) -> EchoStack:
        for info in SERVICES:
            if info.name in self.service_names:
                await self.start(info.name)
        from services.edge.app import start_edge

        self.edge = await start_edge(self.settings)
        self._admin_broker = make_broker(self.nats_url)
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
            name, module.build_router, self.settings, embedder=self.embedder if info.embedder else None
        )

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
            read_scopes=read if read is not None else ["shared", "solo"],
            write_scopes=write if write is not None else ["shared", "solo"],
        )

    def client(self, token: str) -> AbstractAsyncContextManager[Client]:
        """A real MCP SDK client over HTTP with the bearer token."""
        return mcp_http_client(self.url, token)

    async def admin_call(self, service: str, verb: str, args: dict[str, Any], timeout: float = 10) -> dict[str, Any]:
        """A bus request as the org's admin identity (what the CLI sends)."""
        return await BusClient(self._admin_broker).call(
            caller=Caller(org=self.org, agent_id="admin", read_scopes=["*"], write_scopes=["*"]),
            service=service, verb=verb, args=args, timeout=timeout,
        )
