"""FastStream NATS brokers, built the same way everywhere (tracing on, message logging off)."""

from __future__ import annotations

from faststream.nats import NatsBroker

from libs.telemetry import bus_middleware


def make_broker(nats_url: str) -> NatsBroker:
    # logger=None: the broker would otherwise log every message at INFO, payloads included.
    return NatsBroker(nats_url, middlewares=[bus_middleware()], logger=None, max_reconnect_attempts=-1)
