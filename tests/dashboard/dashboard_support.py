"""Shared pieces of the dashboard tests: a seeded stack or test tier, and a running dashboard beside it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import numpy as np

from echo_memory.libs.local.cli.dashboard_commands import seed_scope
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.server.bus.broker import make_broker
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import Routes, timed_admin_call
from echo_memory.libs.testing.tiers import Handlers
from echo_memory.services.dashboard.app import RunningDashboard, start_dashboard

_VECTORS: dict[str, np.ndarray] = {}


def remembered(embedder: MiniLM) -> Callable[[list[str]], np.ndarray]:
    """The real model's vectors, each text embedded once per test session (every test seeds the same org)."""

    def embed(texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in _VECTORS]
        _VECTORS.update(zip(missing, embedder.embed(missing), strict=True))
        return np.stack([_VECTORS[t] for t in texts]) if texts else embedder.embed([])

    return embed


async def seed(stack: EchoStack, embedder: MiniLM, facts: int = 300, scope: str = "demo") -> dict[str, int]:
    """The invented org in `scope`, restored through the audit service's import."""
    return await seed_scope(stack.admin_call, stack.settings, scope, facts, seed=1, embed=remembered(embedder))


async def seed_tier(tier: Handlers | Routes, embedder: MiniLM, facts: int = 300, scope: str = "demo") -> dict[str, int]:
    """`seed` on a test tier: the same invented org, restored through the audit service's routes."""
    return await seed_scope(timed_admin_call(tier), tier.settings, scope, facts, seed=1, embed=remembered(embedder))


@asynccontextmanager
async def dashboard(stack: EchoStack) -> AsyncIterator[RunningDashboard]:
    broker = make_broker(stack.nats_url)
    await broker.start()
    running = await start_dashboard(stack.settings, broker, free_port())
    try:
        yield running
    finally:
        await running.stop()
