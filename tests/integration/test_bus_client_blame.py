"""Whom `BusClient.call` blames, over a real nats-server: the bus when it is down, the service when not."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from typing import Any

import nats
import pytest
from faststream.nats import NatsBroker

from echo_memory.libs.core.contracts.admin import NoArgs
from echo_memory.libs.core.contracts.bus import Reply, Request
from echo_memory.libs.core.contracts.errors import BusTimeout, EchoError, Internal, Unavailable
from echo_memory.libs.core.contracts.identity import admin_caller
from echo_memory.libs.core.contracts.query import QueryMemoryInput
from echo_memory.libs.core.contracts.subjects import request_subject
from echo_memory.libs.core.contracts.verbs import QUERY_MEMORY, STATUS, Verb
from echo_memory.libs.local.supervisor.nats import NatsServer
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.server.bus.broker import make_broker, stop_broker, subscriptions_registered
from echo_memory.libs.server.bus.client import BusClient, bus_connected
from echo_memory.libs.testing import server_dir

ORG = "blame"
SERVICE, VERB = STATUS.service, STATUS.name


@pytest.fixture
def own_nats() -> Iterator[NatsServer]:
    """A nats-server of this test alone, so the test may stop it."""
    base = server_dir("blame")
    server = NatsServer(base, free_port())
    server.start()
    yield server
    server.stop()
    shutil.rmtree(base, ignore_errors=True)


async def _call(broker: NatsBroker, timeout: float = 1.0) -> EchoError:
    with pytest.raises(EchoError) as caught:
        await BusClient(broker).call(STATUS, NoArgs(), caller=admin_caller(ORG), timeout=timeout)
    return caught.value


async def _until(broker: NatsBroker, *, connected: bool) -> None:
    for _ in range(200):
        if bus_connected(broker) is connected:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the client never became {'connected' if connected else 'disconnected'}")


async def test_no_service_on_a_live_bus_names_the_service(own_nats: NatsServer) -> None:
    broker = make_broker(own_nats.url)
    await broker.start()
    try:
        error = await _call(broker)
    finally:
        await broker.stop()
    assert type(error) is Unavailable
    assert f"no {SERVICE} service" in error.message


async def test_a_silent_service_on_a_live_bus_is_a_time_out_naming_it(own_nats: NatsServer) -> None:
    listener = await nats.connect(own_nats.url)
    await listener.subscribe(request_subject(ORG, SERVICE, VERB))  # receives, never replies
    await subscriptions_registered(listener)
    broker = make_broker(own_nats.url)
    await broker.start()
    try:
        error = await _call(broker, timeout=0.5)
    finally:
        await broker.stop()
        await listener.close()
    assert type(error) is BusTimeout
    assert f"the {SERVICE} service did not answer" in error.message


async def _answering(url: str, reply: Reply, heard: list[Request], verb: Verb[Any, Any] = STATUS) -> nats.NATS:
    """A stand-in for `verb`'s service that records each request and answers every one with `reply`."""
    listener = await nats.connect(url)

    async def answer(msg: nats.aio.msg.Msg) -> None:
        heard.append(Request.model_validate_json(msg.data))
        await msg.respond(reply.model_dump_json().encode())

    await listener.subscribe(request_subject(ORG, verb.service, verb.name), cb=answer)
    await subscriptions_registered(listener)
    return listener


async def test_a_result_that_is_not_the_verbs_model_is_an_internal_error(own_nats: NatsServer) -> None:
    heard: list[Request] = []
    errors: list[tuple[str, str, str]] = []
    listener = await _answering(own_nats.url, Reply(ok=True, result={"scopes": "not a list"}), heard)
    broker = make_broker(own_nats.url)
    await broker.start()
    try:
        with pytest.raises(Internal, match="not a StatusResult") as caught:
            await BusClient(broker, on_error=lambda *e: errors.append(e)).call(
                STATUS, NoArgs(), caller=admin_caller(ORG), timeout=5)
        # the same reply through the untyped door is returned as sent
        raw = await BusClient(broker).call_by_name(
            caller=admin_caller(ORG), service=SERVICE, verb=VERB, args={}, timeout=5)
    finally:
        await broker.stop()
        await listener.close()
    assert caught.value.retryable is False
    assert errors == [(SERVICE, VERB, "internal")]
    assert raw == {"scopes": "not a list"}
    assert [r.args for r in heard] == [{}, {}]


async def test_only_the_arguments_a_caller_set_are_sent(own_nats: NatsServer) -> None:
    # The service fills the defaults the caller left out, exactly as for a dict without them.
    heard: list[Request] = []
    listener = await _answering(own_nats.url, Reply(ok=False, error=Internal("stop here").to_info()), heard,
                                QUERY_MEMORY)
    broker = make_broker(own_nats.url)
    await broker.start()
    try:
        for args in (QueryMemoryInput(query="why", top_k=3), QueryMemoryInput(query="why", digest=False)):
            with pytest.raises(Internal, match="stop here"):
                await BusClient(broker).call(QUERY_MEMORY, args, caller=admin_caller(ORG), timeout=5)
    finally:
        await broker.stop()
        await listener.close()
    assert [r.args for r in heard] == [{"query": "why", "top_k": 3}, {"query": "why", "digest": False}]


@pytest.mark.parametrize("reconnect_forever", [True, False], ids=["service-broker", "cli-broker"])
async def test_a_bus_that_went_down_is_blamed_not_the_service(own_nats: NatsServer, reconnect_forever: bool) -> None:
    broker = make_broker(own_nats.url, reconnect_forever=reconnect_forever)
    await broker.start()
    try:
        own_nats.stop()
        await _until(broker, connected=False)
        error = await _call(broker)
    finally:
        if reconnect_forever:  # a service's broker waits for NATS to come back; let it, then stop
            own_nats.start()
            await _until(broker, connected=True)
        await stop_broker(broker)
    assert type(error) is Unavailable and error.retryable
    assert "message bus (NATS) cannot be reached" in error.message
    assert SERVICE not in error.message
