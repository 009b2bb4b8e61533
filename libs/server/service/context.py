"""What a service process holds (`ServiceContext`) and what one request sees (`RequestContext`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
from faststream.nats import NatsBroker

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import Internal
from echo_memory.libs.core.contracts.verbs import verbs_of
from echo_memory.libs.server.store.pool import OrgDatabases
from echo_memory.libs.server.telemetry.metrics import ServiceMetrics

if TYPE_CHECKING:  # the model runtime is loaded only by services that embed
    from echo_memory.libs.server.embed import MiniLM


@dataclass
class ServiceContext:
    """Built once per process and handed to the service's `routes(ctx)`.

    `on_start`, when a service sets it, runs as the process's background task once subscribed
    (the writes service's outbox relay); it is cancelled at stop. `on_stop` runs at stop, once no
    request comes in and before the pools close (the consolidation service ends its run process).
    """

    name: str
    settings: Settings
    broker: NatsBroker
    databases: OrgDatabases
    embedder: MiniLM | None = None
    lazy_model: bool = False  # load the model at the first request that needs it
    on_start: Callable[[], Awaitable[None]] | None = None
    on_stop: Callable[[], Awaitable[None]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # objects a service keeps by name (its outbox relay)
    _loading: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    metrics: ServiceMetrics = field(init=False)

    def __post_init__(self) -> None:
        self.metrics = ServiceMetrics(self.name, pool_stats=self.databases.pool_stats,
                                      verbs=[v.name for v in verbs_of(self.name)])

    async def load_model(self) -> MiniLM:
        """The embedding model, loaded in a worker thread on first use.

        A load takes 0.3–1 s of CPU; on the event loop it would stall every other request of the
        process (a lexical_status beside the first reindex). The lock keeps it to one load.
        """
        if self.embedder is None and self.lazy_model:
            async with self._loading:
                if self.embedder is None:
                    from echo_memory.libs.server.embed import MiniLM

                    self.embedder = await asyncio.to_thread(MiniLM)
        return self.model()

    def model(self) -> MiniLM:
        """The embedding model (loaded now if the service loads it on first use); `Internal` without one."""
        if self.embedder is None and self.lazy_model:
            from echo_memory.libs.server.embed import MiniLM

            self.embedder = MiniLM()
        if self.embedder is None:
            raise Internal(f"the {self.name} service was started without its embedding model")
        return self.embedder


@dataclass(frozen=True)
class RequestContext:
    """One request: its org and caller, the connection of its one transaction, and the process's parts."""

    org: str
    caller: Caller
    conn: psycopg.AsyncConnection
    service: ServiceContext = field(repr=False)

    @property
    def settings(self) -> Settings:
        return self.service.settings

    @property
    def embedder(self) -> MiniLM:
        """The process's embedding model; `Internal` when the service has none."""
        return self.service.model()

    def reader(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection]:
        """A second connection that sees committed data, for reads beside the transaction; never write on it."""
        return self.service.databases.reader(self.org)
