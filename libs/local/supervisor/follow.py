"""Keep a long-lived client on the embedded bus when `echo-memory up` moves NATS to another port.

`up` keeps NATS on its last port while that port is free, and the client's own reconnect loop
finds it again. When the port was taken, the new URL is only in state.json: while disconnected,
this points the client's reconnect attempts at whatever URL state.json names now.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from nats.aio.client import Client as NatsClient
from nats.errors import ConnectionClosedError

from echo_memory.libs.local.supervisor.state import read_state

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5


def follow_supervisor_nats(connection: NatsClient, home: Path, url: str) -> asyncio.Task[None] | None:
    """Start re-aiming `connection` at state.json's NATS URL whenever it is disconnected.

    Returns the task doing it (cancel it before closing the connection; it also ends when the
    connection closes), or None when the supervisor's state in `home` does not name `url` now:
    the URL was configured for another bus, which this must not redirect.
    """
    state = read_state(home)
    if state is None or state.nats_url != url:
        return None
    return asyncio.create_task(_follow(connection, home, url))


async def _follow(connection: NatsClient, home: Path, current: str) -> None:
    while not connection.is_closed:
        if not connection.is_connected:
            state = read_state(home)
            if state is not None and state.nats_url and state.nats_url != current:
                try:
                    connection.set_server_pool([state.nats_url])
                except ConnectionClosedError:
                    return
                log.info("the embedded NATS moved from %s to %s; reconnecting there", current, state.nats_url)
                current = state.nats_url
        await asyncio.sleep(POLL_SECONDS)
