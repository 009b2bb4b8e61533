"""The authenticated bus: a real nats-server run from the supervisor's own config, real services and edge.

Every process connects as its kind's user; a connection without credentials is refused, and a
user may only do what libs/server/bus/permissions.py grants it (checked against the server itself).
A `watcher` user that may read everything stands in for an attacker who got onto the bus anyway,
to show what crosses it: never a bearer token.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import psycopg
import pytest
from nats.aio.msg import Msg

from echo_memory.libs.core.contracts.bus import Caller, Request
from echo_memory.libs.core.contracts.identity import admin_caller
from echo_memory.libs.core.contracts.subjects import request_subject
from echo_memory.libs.local.supervisor.bus_auth import (
    credentials_file,
    ensure_credentials,
    server_config,
    write_server_config,
)
from echo_memory.libs.local.supervisor.nats import NatsServer
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.server.bus.auth import NatsCredentials, connect_options, new_credentials
from echo_memory.libs.server.bus.broker import subscriptions_registered
from echo_memory.libs.server.bus.permissions import EDGE_VERBS, bus_users
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.probes import write_and_recall
from echo_memory.services.edge.tools import TOOLS


class SecuredBus:
    def __init__(self, home: Path, url: str, users: dict[str, NatsCredentials], watcher: NatsCredentials) -> None:
        self.home, self.url, self.users, self.watcher = home, url, users, watcher

    def files(self) -> dict[str, Path]:
        return {user: credentials_file(self.home, user) for user in self.users}

    def log(self) -> str:
        return (self.home / "nats" / "nats.log").read_text(errors="replace")


@pytest.fixture
def secured_bus(tmp_path: Path) -> Iterator[SecuredBus]:
    home = tmp_path / "home"
    users = ensure_credentials(home)
    watcher = new_credentials("watcher")
    port = free_port()
    config = json.loads(server_config(port, home / "nats", users))
    config["authorization"]["users"].append(
        {"user": "watcher", "password": watcher.password.get_secret_value(), "permissions": {"subscribe": [">"]}}
    )
    path = home / "nats" / "nats.conf"
    write_server_config(path, json.dumps(config))
    server = NatsServer(home / "nats", port, config=path)
    server.start()
    try:
        yield SecuredBus(home, server.url, users, watcher)
    finally:
        server.stop()


@pytest.fixture
async def secured_stack(
    secured_bus: SecuredBus, database_url: str, org: str, embedder: MiniLM
) -> AsyncIterator[EchoStack]:
    async with EchoStack(database_url=database_url, nats_url=secured_bus.url, org=org, embedder=embedder,
                         bus_credentials=secured_bus.files()) as running:
        yield running


async def _connect(url: str, credentials: NatsCredentials | None, errors: list[str]) -> nats.NATS:
    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    return await nats.connect(url, error_cb=on_error, allow_reconnect=False, connect_timeout=3,
                              **connect_options(credentials))


def test_credentials_are_private_files_one_per_process_kind(secured_bus: SecuredBus) -> None:
    assert set(secured_bus.users) == set(bus_users()) >= {"writes", "retrieval", "edge", "admin"}
    for user, path in secured_bus.files().items():
        assert path.stat().st_mode & 0o777 == 0o600, path
        assert json.loads(path.read_text())["user"] == user
    assert (secured_bus.home / "nats" / "nats.conf").stat().st_mode & 0o777 == 0o600
    again = ensure_credentials(secured_bus.home)  # kept across `up`s: a running `echo-memory mcp` still gets in
    assert {u: c.password for u, c in again.items()} == {u: c.password for u, c in secured_bus.users.items()}


async def test_a_process_without_credentials_cannot_connect(secured_bus: SecuredBus) -> None:
    with pytest.raises(nats.errors.Error) as caught:
        await _connect(secured_bus.url, None, [])
    assert "authorization violation" in str(caught.value).lower()
    wrong = secured_bus.users["admin"].model_copy(update={"password": new_credentials("admin").password})
    with pytest.raises(nats.errors.Error):
        await _connect(secured_bus.url, wrong, [])


async def test_the_edge_user_can_neither_read_requests_nor_mint_tokens(
    secured_stack: EchoStack, secured_bus: SecuredBus
) -> None:
    errors: list[str] = []
    edge = await _connect(secured_bus.url, secured_bus.users["edge"], errors)
    try:
        seen: list[Msg] = []

        async def keep(msg: Msg) -> None:
            seen.append(msg)

        await edge.subscribe("echo.v1.>", cb=keep)
        await edge.subscribe("_INBOX.admin.>", cb=keep)  # another user's replies
        forged = Request(caller=admin_caller(secured_stack.org), args={"agent_id": "forged"})
        with pytest.raises(nats.errors.Error):  # no timeout: the server refuses the publish
            await edge.request(request_subject(secured_stack.org, "writes", "token_create"),
                               forged.model_dump_json().encode(), timeout=2)
        await secured_stack.admin_call("writes", "status", {})  # traffic the subscriptions would have seen
        await asyncio.sleep(0.3)
    finally:
        await edge.close()
    assert seen == []
    assert sum("permissions violation" in e.lower() for e in errors) >= 3, errors
    with psycopg.connect(secured_stack.database_url) as conn:
        assert conn.execute("SELECT count(*) FROM tokens WHERE agent_id = 'forged'").fetchone() == (0,)


async def test_a_service_user_answers_only_its_own_verbs(secured_stack: EchoStack, secured_bus: SecuredBus) -> None:
    errors: list[str] = []
    retrieval = await _connect(secured_bus.url, secured_bus.users["retrieval"], errors)
    try:
        await retrieval.subscribe("echo.v1.*.writes.>")
        caller = Caller(org=secured_stack.org, agent_id="x", read_scopes=["*"])
        with pytest.raises(nats.errors.Error):
            await retrieval.request(request_subject(secured_stack.org, "writes", "status"),
                                    Request(caller=caller, args={}).model_dump_json().encode(), timeout=2)
        await asyncio.sleep(0.2)
    finally:
        await retrieval.close()
    assert sum("permissions violation" in e.lower() for e in errors) >= 2, errors


async def test_tools_work_end_to_end_and_no_bearer_token_crosses_the_bus(
    secured_stack: EchoStack, secured_bus: SecuredBus
) -> None:
    payloads: list[bytes] = []

    async def keep(msg: Msg) -> None:
        payloads.append(msg.subject.encode() + b" " + msg.data + json.dumps(dict(msg.headers or {})).encode())

    watcher = await _connect(secured_bus.url, secured_bus.watcher, [])
    await watcher.subscribe(">", cb=keep)
    await subscriptions_registered(watcher)
    token = secured_stack.issue_token("agent-a")
    try:
        async with secured_stack.client(token) as client:
            await write_and_recall(client)
        for _ in range(50):  # the outbox relay publishes the write's events to JetStream as the writes user
            if any(b".events." in p for p in payloads):
                break
            await asyncio.sleep(0.1)
    finally:
        await watcher.close()
    everything = b"\n".join(payloads)
    assert b"token_verify" in everything and b".events." in everything  # the watcher did see the traffic
    assert token.encode() not in everything
    assert token.split("_", 2)[2].encode() not in everything  # nor its random part alone
    assert "Violation" not in secured_bus.log()  # the legitimate users needed nothing more


def test_the_edge_user_may_send_exactly_the_verbs_of_its_tools() -> None:
    tool_verbs = {(t.verb.service, t.verb.name) for t in TOOLS}
    assert set(EDGE_VERBS) == tool_verbs | {("writes", "token_verify")}


def test_every_subject_string_the_table_grants_is_a_real_subject() -> None:
    from echo_memory.libs.server.bus.permissions import permissions

    for user in bus_users():
        granted: dict[str, Any] = permissions(user)
        for pattern in granted["publish"]["allow"] + granted["subscribe"]["allow"]:
            assert " " not in pattern and pattern.strip(".") == pattern, (user, pattern)


async def test_the_cli_without_valid_credentials_is_refused_in_one_sentence(
    secured_bus: SecuredBus, tmp_path: Path
) -> None:
    from echo_memory.libs.core.config import Settings
    from echo_memory.libs.local.connection import BusRefused, connect_bus
    from echo_memory.libs.server.bus.auth import write_credentials
    from echo_memory.libs.server.bus.broker import stop_broker

    wrong = tmp_path / "wrong.json"
    write_credentials(wrong, new_credentials("admin"))
    for credentials in (wrong, None):
        settings = Settings(home=tmp_path / "nohome", nats_url=secured_bus.url, nats_credentials=credentials)
        with pytest.raises(BusRefused) as caught:
            await connect_bus(settings)
        assert "refused this command's credentials" in caught.value.message
    leaky = tmp_path / "leaky.json"
    write_credentials(leaky, secured_bus.users["admin"])
    leaky.chmod(0o644)
    with pytest.raises(BusRefused) as caught:
        await connect_bus(Settings(home=tmp_path / "nohome", nats_url=secured_bus.url, nats_credentials=leaky))
    assert "readable by other users" in caught.value.message
    good = Settings(home=tmp_path / "nohome", nats_url=secured_bus.url,
                    nats_credentials=secured_bus.files()["admin"])
    await stop_broker(await connect_bus(good))


async def test_a_service_finds_an_org_in_the_registry_as_its_own_user(
    secured_stack: EchoStack, secured_bus: SecuredBus, database_url: str
) -> None:
    """The operator's path: an org registered (as admin) while services run is served, KV read as the service user."""
    from echo_memory.libs.server.bus.broker import make_broker
    from echo_memory.libs.server.bus.client import BusClient
    from echo_memory.libs.server.orgs import register_org, unregister_org

    other = secured_stack.org + "-b"
    await register_org(secured_bus.url, other, database_url, secured_bus.users["admin"])
    broker = make_broker(secured_bus.url, credentials=secured_bus.users["admin"])
    await broker.start()
    try:
        status = await BusClient(broker).call_by_name(caller=admin_caller(other), service="writes", verb="status",
                                              args={}, timeout=10)
        assert "schema_version" in status
    finally:
        await broker.stop()
        await unregister_org(secured_bus.url, other, secured_bus.users["admin"])
    assert "Violation" not in secured_bus.log()
