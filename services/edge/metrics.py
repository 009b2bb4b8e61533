"""The one scrape URL: the edge's own metrics, and every service replica's, at /metrics.

The edge counts MCP tool calls (by tool and outcome, with a latency histogram) and the bus
requests that timed out or came back with a typed error. On each scrape it also asks every
service process over the bus (libs/server/telemetry/metrics.py, METRICS_SUBJECT) for its exposition
text and merges the answers, each sample labelled with the `replica` that sent it. A service that
does not answer within the scrape's bound is reported by `echo_metrics_service_up{service} 0`
instead of being silently left out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator

import prometheus_client
from nats.aio.client import Client as NATS
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from echo_memory.libs.core.contracts.verbs import VERBS
from echo_memory.libs.server.telemetry.metrics import LATENCY_BUCKETS, METRICS_SUBJECT, parse_answer

SCRAPE_SECONDS = 1.0  # at most this long waiting for the services on one scrape
QUIET_SECONDS = 0.05  # once every service answered, stop after this long without another replica


class EdgeMetrics:
    """The edge process's own metrics, kept for its life."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.calls = Counter("echo_edge_tool_calls", "MCP tool calls by tool and outcome (ok or the error code).",
                             ["tool", "outcome"], registry=r)
        self.seconds = Counter("echo_edge_tool_seconds", "Time spent in MCP tool calls, by tool.", ["tool"],
                               registry=r)
        self.duration = Histogram("echo_edge_tool_duration_seconds", "MCP tool call latency at the edge, by tool.",
                                  ["tool"], buckets=LATENCY_BUCKETS, registry=r)
        self.bus_timeouts = Counter("echo_bus_timeouts", "Bus requests no service answered in time.",
                                    ["service", "verb"], registry=r)
        self.bus_errors = Counter("echo_bus_errors", "Bus requests answered with a typed error, or failed, by code.",
                                  ["service", "verb", "code"], registry=r)
        for v in VERBS:  # every pair present from the start, so a dashboard reads 0 rather than nothing
            self.bus_timeouts.labels(v.service, v.name)
        self.service_up = Gauge("echo_metrics_service_up",
                                "1 when the service answered this scrape's metrics request, else 0.", ["service"],
                                registry=r)

    def record(self, tool: str, outcome: str, seconds: float) -> None:
        """Count one tool call; `outcome` is `ok` or the error code (`rate_limited`, `scope_denied`, …)."""
        self.calls.labels(tool, outcome).inc()
        self.seconds.labels(tool).inc(seconds)
        self.duration.labels(tool).observe(seconds)

    def bus_error(self, service: str, verb: str, code: str) -> None:
        """One bus request that ended in an error (BusClient's hook)."""
        self.bus_errors.labels(service, verb, code).inc()
        if code == "bus_timeout":
            self.bus_timeouts.labels(service, verb).inc()

    def render(self, services: Iterable[tuple[str, str]] = ()) -> str:
        """The exposition text: the edge's metrics, then the services' (`(replica, text)` pairs) merged."""
        own = prometheus_client.generate_latest(self.registry).decode()
        merged = list(services)
        if not merged:
            return own
        registry = CollectorRegistry()
        registry.register(_Merged(merged))
        return own + prometheus_client.generate_latest(registry).decode()


class _Merged(Collector):
    """Families of several exposition texts as one: samples of a name together, each with its replica."""

    def __init__(self, texts: list[tuple[str, str]]) -> None:
        self.texts = texts

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for replica, text in self.texts:
            for family in text_string_to_metric_families(text):
                into = families.setdefault(family.name, Metric(family.name, family.documentation, family.type))
                for s in family.samples:
                    into.add_sample(s.name, {**s.labels, "replica": replica}, s.value, s.timestamp, s.exemplar)
        yield from families.values()


async def scrape_services(nc: NATS, expected: Iterable[str]) -> tuple[list[tuple[str, str]], set[str]]:
    """Ask every service replica for its metrics; ((replica, text) answers, the services that answered).

    Bounded by SCRAPE_SECONDS whatever happens; an unreadable answer is skipped (its service then
    counts as not answering).
    """
    wanted = set(expected)
    answers: list[tuple[str, str]] = []
    answered: set[str] = set()
    arrived = asyncio.Event()
    inbox = nc.new_inbox()

    async def on_answer(msg: object) -> None:
        try:
            answer = parse_answer(getattr(msg, "data", b""))
        except ValueError:
            return
        answers.append((f"{answer['service']}@{answer['replica']}", str(answer["text"])))
        answered.add(str(answer["service"]))
        arrived.set()

    sub = await nc.subscribe(inbox, cb=on_answer)
    try:
        await nc.publish(METRICS_SUBJECT, b"", reply=inbox)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SCRAPE_SECONDS
        while loop.time() < deadline:
            arrived.clear()
            wait = min(QUIET_SECONDS if wanted <= answered else deadline - loop.time(), deadline - loop.time())
            try:
                async with asyncio.timeout(max(wait, 0)):  # unlike wait_for, never turns a cancel into a time-out
                    await arrived.wait()
            except TimeoutError:
                if wanted <= answered:
                    break
    finally:
        await sub.unsubscribe()
    return answers, answered


__all__ = ["EdgeMetrics", "scrape_services"]
