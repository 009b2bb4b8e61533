"""How CLI commands find the running system and talk to it over the bus, as the org's admin."""

from __future__ import annotations

from typing import Any

from libs.bus.broker import make_broker
from libs.bus.client import BusClient
from libs.config import Settings
from libs.contracts.identity import ADMIN_AGENT, admin_caller
from libs.supervisor.state import read_state

__all__ = ["ADMIN_AGENT", "NotRunning", "admin_call", "nats_url"]


class NotRunning(RuntimeError):
    """No NATS URL configured and no running embedded system found."""


def nats_url(settings: Settings) -> str:
    if settings.nats_url:
        return settings.nats_url
    state = read_state(settings.home.expanduser())
    if state is None or not state.nats_url:
        raise NotRunning(
            f"Echo Memory is not running for data directory {settings.home}; start it with `echo-memory up`"
        )
    return state.nats_url


async def admin_call(settings: Settings, service: str, verb: str, args: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
    """One request as the org's admin identity (the CLI on the host that runs the bus)."""
    broker = make_broker(nats_url(settings))
    await broker.start()
    try:
        return await BusClient(broker).call(
            caller=admin_caller(settings.org),
            service=service,
            verb=verb,
            args=args,
            timeout=timeout or settings.timeouts.admin,
        )
    finally:
        await broker.stop()
