"""A throw-away Echo Memory for harness runs: embedded Postgres, nats-server, every service, the edge.

`eval`, `benchmark` and the lab's experiments (lab/) use it so that padding a store with 100k
synthetic facts, or restarting retrieval with a channel switched off, never touches the user's
own memory. Everything lives under one temporary directory that is removed on exit.

The services run in-process through `EchoStack` (the harness the test suite uses): same code,
same real Postgres, NATS and HTTP edge, one Python process instead of one per service.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from echo_memory.libs.core.config.consolidation import ConsolidationSettings
from echo_memory.libs.core.config.edge import EdgeSettings
from echo_memory.libs.core.config.retrieval import RetrievalSettings
from echo_memory.libs.core.contracts.verbs import QUERY_MEMORY, WRITE_EPISODE, Verb
from echo_memory.libs.local.stack import EchoStack, server_dir
from echo_memory.libs.local.supervisor.nats import NatsServer
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.local.supervisor.postgres import EmbeddedPostgres
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.store.schema import apply_migrations

ORG = "bench"
# A harness' bus call: (service, verb, arguments) -> the result as the service sent it.
Call = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]


def channel_settings(channels: str | None) -> RetrievalSettings:
    """Retrieval settings with only the channels in the JSON list `channels` on (None: every channel)."""
    if channels is None:
        return RetrievalSettings()
    return RetrievalSettings(channels=tuple(json.loads(channels)))


@asynccontextmanager
async def throwaway_stack(
    embedder: MiniLM | None = None, retrieval: RetrievalSettings | None = None,
    consolidation: ConsolidationSettings | None = None,
) -> AsyncIterator[EchoStack]:
    """A running system on fresh servers; yields the EchoStack, stops and deletes everything on exit.

    `retrieval` configures its retrieval service (default: the defaults), `consolidation` its
    consolidation service (default: EchoStack's, which runs only when asked). The edge's per-token
    rate limit is switched off for the stack: a benchmark makes thousands of calls with one token
    on purpose.
    """
    base = server_dir("harness")
    pg = EmbeddedPostgres(base / "postgres", free_port(), durable=False)
    nats = NatsServer(base / "nats", free_port())
    try:
        await asyncio.to_thread(pg.start)
        await asyncio.to_thread(apply_migrations, pg.url())
        await asyncio.to_thread(nats.start)
        async with EchoStack(
            database_url=pg.url(), nats_url=nats.url, org=ORG, embedder=embedder or MiniLM(),
            edge=EdgeSettings(rate_per_minute=0), retrieval=retrieval, consolidation=consolidation,
        ) as stack:
            yield stack
    finally:
        nats.stop()
        await asyncio.to_thread(pg.stop)
        shutil.rmtree(base, ignore_errors=True)


# A verb of each service the harness restarts; probed with invalid arguments, which the service
# refuses without side effects — any answer at all means it is subscribed. Invalid arguments are no
# instance of the verb's model, so the probe goes by name.
PROBE_VERBS: dict[str, Verb[Any, Any]] = {"retrieval": QUERY_MEMORY, "writes": WRITE_EPISODE}


async def restart_service(
    stack: EchoStack, name: str, timeout: float = 15, *, retrieval: RetrievalSettings | None = None
) -> None:
    """Restart one in-process service, with `retrieval` as the stack's retrieval settings when given.

    Returns once the new instance answers requests: its subscription travels on its own NATS
    connection, so a request sent right after start-up could otherwise meet no responders.
    """
    from echo_memory.libs.core.contracts.errors import EchoError, Unavailable

    if retrieval is not None:
        stack.settings = stack.settings.model_copy(update={"retrieval": retrieval})
    await stack.stop(name)
    await stack.start(name)
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            probe = PROBE_VERBS[name]
            await stack.admin_call(probe.service, probe.name, {"__probe__": True}, timeout=5)
        except Unavailable:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.05)
            continue
        except EchoError:
            pass  # refused as invalid: the service is up
        return


def stack_call(stack: EchoStack, timeout: float = 600) -> Call:
    """The harness' `call(service, verb, args)` over the stack's admin bus connection.

    By name: the runners (libs/local/eval/runner.py and the other harnesses) take this one call shape,
    which the tests also fill with `EchoStack.admin_call` and the test tiers' `admin_call`.
    """

    async def call(service: str, verb: str, args: dict[str, Any]) -> dict[str, Any]:
        return await stack.admin_call(service, verb, args, timeout=timeout)

    return call
