"""A long-lived client follows the embedded NATS to the port state.json names (real nats-servers)."""

from __future__ import annotations

import asyncio
import shutil
from datetime import UTC, datetime
from pathlib import Path

import nats

from echo_memory.libs.local.supervisor.follow import follow_supervisor_nats
from echo_memory.libs.local.supervisor.nats import NatsServer
from echo_memory.libs.local.supervisor.ports import free_port
from echo_memory.libs.local.supervisor.state import State, write_state
from echo_memory.libs.testing import server_dir


def _state(home: Path, url: str) -> None:
    write_state(home, State(supervisor_pid=1, home=str(home), org="local", started_at=datetime.now(tz=UTC),
                            nats_url=url))


async def test_a_disconnected_client_reconnects_where_state_json_says_nats_moved(tmp_path: Path) -> None:
    base = server_dir("follow")
    first, second = NatsServer(base / "a", free_port()), NatsServer(base / "b", free_port())
    first.start()
    _state(tmp_path, first.url)
    connection = await nats.connect(first.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    follow = follow_supervisor_nats(connection, tmp_path, first.url)
    assert follow is not None
    try:
        first.stop()
        second.start()
        _state(tmp_path, second.url)
        for _ in range(100):
            if connection.is_connected and connection.connected_url.port == second.port:
                break
            await asyncio.sleep(0.1)
        assert connection.is_connected and connection.connected_url.port == second.port
        await connection.flush(timeout=2)  # a PING answered by the new server
    finally:
        follow.cancel()
        await connection.close()
        second.stop()
        shutil.rmtree(base, ignore_errors=True)


async def test_a_url_the_state_does_not_name_is_never_redirected(tmp_path: Path) -> None:
    _state(tmp_path, "nats://127.0.0.1:1")
    base = server_dir("follow-own")
    server = NatsServer(base, free_port())
    server.start()
    connection = await nats.connect(server.url)
    try:
        assert follow_supervisor_nats(connection, tmp_path, server.url) is None
    finally:
        await connection.close()
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
