"""`/readyz` tells the truth: ready only while the bus is up and writes and retrieval answer on it."""

from __future__ import annotations

import httpx2

from echo_memory.libs.core.config.edge import EdgeSettings
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing import EchoStack


async def _readyz(stack: EchoStack) -> tuple[int, str]:
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.get(f"{stack.edge.base_url}/readyz")
    return response.status_code, response.json()["status"]


async def test_readyz_follows_the_writes_and_retrieval_services(stack: EchoStack) -> None:
    assert await _readyz(stack) == (200, "ready")
    await stack.stop("retrieval")
    assert await _readyz(stack) == (503, "retrieval not answering")
    await stack.stop("writes")
    assert await _readyz(stack) == (503, "writes and retrieval not answering")
    await stack.start("retrieval")
    await stack.start("writes")
    assert await _readyz(stack) == (200, "ready")
    scopes = (await stack.admin_call("writes", "status", {}))["scopes"]
    assert all(s["facts"] == 0 and s["last_write"] is None for s in scopes), scopes  # probes wrote nothing


async def test_readyz_of_an_edge_serving_every_org_probes_the_default_org(
    database_url: str, nats_url: str, org: str, embedder: MiniLM
) -> None:
    """The chart's default edge (ECHO_MEMORY_EDGE_ORGS='["*"]') names no one org; its probe asks the default org's."""
    async with EchoStack(database_url=database_url, nats_url=nats_url, org=org, embedder=embedder,
                         services=("writes", "retrieval"), edge=EdgeSettings(orgs=["*"])) as stack:
        assert await _readyz(stack) == (200, "ready")
