"""Bad bearer tokens are cheap to refuse: no bus trip for a malformed one, a per-address limit on
refusals before any bus trip, and a flood of random tokens never pushes live ones out of the cache.

Bus trips are counted by a plain subscriber on the session's (open) NATS: every token_verify
request the edge sends is seen there too.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import httpx2
import nats
import pytest
from edge_support import extra_edge

from echo_memory.libs.core.contracts.subjects import request_subject
from echo_memory.libs.core.contracts.tokens import mint
from echo_memory.libs.server.bus.broker import make_broker, subscriptions_registered
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.libs.testing import EchoStack
from echo_memory.services.edge.identity import BusTokenVerifier

INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class Trips:
    def __init__(self) -> None:
        self.count = 0


@pytest.fixture
async def trips(stack: EchoStack) -> AsyncIterator[Trips]:
    seen = Trips()
    nc = await nats.connect(stack.nats_url)

    async def count(msg: object) -> None:
        seen.count += 1

    await nc.subscribe(request_subject(stack.org, "writes", "token_verify"), cb=count)
    await subscriptions_registered(nc)
    yield seen
    await nc.close()


async def _post(http: httpx2.AsyncClient, url: str, token: str) -> int:
    response = await http.post(url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {token}"})
    return response.status_code


async def _settle() -> None:
    await asyncio.sleep(0.3)  # the counting subscriber runs on its own connection


async def test_malformed_tokens_are_refused_without_a_bus_trip(stack: EchoStack, trips: Trips) -> None:
    valid = stack.issue_token("cursor")
    malformed = ["not-a-token", f"em_{stack.org}_short", f"em_{stack.org}_" + "A" * 44,
                 f"em_{stack.org.upper()}_" + "A" * 43, valid[:-1] + "!", "em__" + "A" * 43]
    async with httpx2.AsyncClient(timeout=10) as http:
        for token in malformed:
            assert await _post(http, stack.url, token) == 401, token
        await _settle()
        assert trips.count == 0
        assert await _post(http, stack.url, valid) == 200
        await _settle()
        assert trips.count == 1  # the one live token was asked about, by digest


async def test_an_address_that_keeps_presenting_bad_tokens_gets_429_before_any_bus_trip(
    stack: EchoStack, trips: Trips
) -> None:
    valid = stack.issue_token("cursor")
    async with extra_edge(stack, refused_burst=3, refused_per_minute=1) as edge, \
            httpx2.AsyncClient(timeout=10) as http:
        assert await _post(http, edge.url, valid) == 200  # verified, so cached as live
        unknown = [mint(stack.org) for _ in range(6)]  # well-formed: each costs a bus trip while allowed
        codes = [await _post(http, edge.url, token) for token in unknown]
        await _settle()
        assert codes == [401, 401, 401, 429, 429, 429]
        assert trips.count == 1 + 3  # the live token once, then only the three refusals the burst allows
        response = await http.post(edge.url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {mint(stack.org)}"})
        assert response.status_code == 429 and int(response.headers["retry-after"]) >= 1
        assert await _post(http, edge.url, valid) == 200  # a live token from that address still gets in


async def test_ten_thousand_random_tokens_do_not_evict_a_live_token(stack: EchoStack, trips: Trips) -> None:
    broker = make_broker(stack.nats_url)
    await broker.start()
    try:
        verifier = BusTokenVerifier(BusClient(broker), 3.0, cache_seconds=600, orgs=[stack.org])
        valid = stack.issue_token("cursor")
        assert await verifier.verify_token(valid) is not None
        for _ in range(10_000):  # tokens of an org this edge does not serve: refused and remembered, no bus trip
            assert await verifier.verify_token(f"em_elsewhere_{secrets.token_urlsafe(32)}") is None
        for _ in range(200):  # and some for our own org, which do ask the bus
            assert await verifier.verify_token(mint(stack.org)) is None
        await _settle()
        before = trips.count
        assert (await verifier.verify_token(valid)) is not None
        await _settle()
        assert trips.count == before  # answered from the cache: the flood did not push it out
    finally:
        await broker.stop()


async def test_checks_that_could_not_be_made_are_not_charged_to_the_address(stack: EchoStack) -> None:
    """With the writes service down a new token gets 401, but the address is not locked out for it."""
    tokens = [stack.issue_token(f"agent-{i}") for i in range(4)]
    async with extra_edge(stack, refused_burst=2, refused_per_minute=1) as edge, \
            httpx2.AsyncClient(timeout=10) as http:
        await stack.stop("writes")
        try:
            codes = [await _post(http, edge.url, token) for token in tokens]
        finally:
            await stack.start("writes")
        assert codes == [401, 401, 401, 401]  # never 429: no token was refused, none could be checked
        assert await _post(http, edge.url, tokens[0]) == 200
