"""Prometheus metrics of a service process, and how they reach the one scrape URL (the edge's /metrics).

Each running service keeps its own registry (`ServiceMetrics`): per-verb latency and errors,
requests in flight, its database pools, and what the service itself counts (writes by outcome,
recall cost). Services hold no HTTP server: every replica subscribes to METRICS_SUBJECT without a
queue group, so one request reaches all of them, and answers with its exposition text. The edge
asks on each scrape, merges the answers with a `replica` label and serves them beside its own
(services/edge/metrics.py). docs/operations.md lists every metric and why it travels this way.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from echo_memory.libs.core.contracts.subjects import METRICS_SUBJECT

# Not an org: org names start with a letter or digit, so no request subject can look like this.
# Seconds-scale buckets from 1 ms to 30 s: a query is a few ms, a bulk import many seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# The `_created` series double every counter for nothing a dashboard reads.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

PoolStats = Callable[[], dict[str, dict[str, int]]]


def replica_id() -> str:
    """What tells two processes of one service apart in a merged scrape: host and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


class _PoolCollector(Collector):
    """Connection-pool gauges read at scrape time from psycopg_pool's own statistics."""

    def __init__(self, service: str, stats: PoolStats) -> None:
        self.service, self.stats = service, stats

    def collect(self) -> Iterator[Metric]:
        families = {
            "pool_max": GaugeMetricFamily("echo_db_pool_max", "Largest size the database pool may grow to.",
                                          labels=["service", "org"]),
            "pool_size": GaugeMetricFamily("echo_db_pool_size", "Connections the database pool holds now.",
                                           labels=["service", "org"]),
            "pool_available": GaugeMetricFamily("echo_db_pool_available", "Idle connections in the pool.",
                                                labels=["service", "org"]),
            "requests_waiting": GaugeMetricFamily(
                "echo_db_pool_waiting", "Requests waiting for a connection (saturation).", labels=["service", "org"]),
        }
        for org, stats in sorted(self.stats().items()):
            for key, family in families.items():
                family.add_metric([self.service, org], float(stats.get(key, 0)))
        yield from families.values()


class ServiceMetrics:
    """One service's metrics; `render()` is its Prometheus exposition text."""

    def __init__(self, service: str, pool_stats: PoolStats | None = None, verbs: list[str] | None = None) -> None:
        self.service = service
        self.registry = CollectorRegistry()
        r = self.registry
        self.verb_seconds = Histogram(
            "echo_verb_duration_seconds", "Time a service spent answering one verb, by outcome (ok or error code).",
            ["service", "verb", "outcome"], buckets=LATENCY_BUCKETS, registry=r)
        self.verb_errors = Counter(
            "echo_verb_errors", "Verb requests answered with a typed error, by code.", ["service", "verb", "code"],
            registry=r)
        self.in_flight = Gauge("echo_verb_in_flight", "Requests a service is answering now.", ["service", "verb"],
                               registry=r)
        self.writes = Counter(
            "echo_writes", "write_episode calls by outcome (stored, partial, deferred, unchanged, no_facts, "
            "refused) and reason (why it was not stored; `none` when it was).", ["outcome", "reason"], registry=r)
        self.facts_written = Counter("echo_writes_facts", "Facts stored by write_episode, by agent.", ["agent"],
                                     registry=r)
        self.recalls = Counter("echo_recall_requests", "query_memory calls answered, by agent.", ["agent"], registry=r)
        self.recall_tokens = Counter(
            "echo_recall_tokens_returned", "Tokens query_memory returned, by agent.", ["agent"], registry=r)
        self.recall_dump_tokens = Counter(
            "echo_recall_tokens_full_dump",
            "Tokens pasting every active fact of the scopes read would have cost, per recall, by agent.",
            ["agent"], registry=r)
        self.recall_facts = Counter("echo_recall_facts_returned", "Facts query_memory returned, by agent.", ["agent"],
                                    registry=r)
        self.recall_empty = Counter("echo_recall_empty", "query_memory calls that returned nothing, by agent.",
                                    ["agent"], registry=r)
        self.channel_results = Counter(
            "echo_recall_channel_results", "Returned items each retrieval channel found (an item may count for "
            "several).", ["channel"], registry=r)
        self.consolidation = Counter(
            "echo_consolidation", "What consolidation runs did, by outcome: placed, promoted, demoted, unchanged, "
            "digests_built, digests_ended, digests_unchanged, failed, skipped; and hot_copied, facts copied into "
            "the hot tier's indexes between runs.", ["outcome"], registry=r)
        for verb in verbs or []:  # present from the start: a dashboard reads 0 rather than nothing
            self.in_flight.labels(service, verb)
        if pool_stats is not None:
            r.register(_PoolCollector(service, pool_stats))

    def observe_verb(self, verb: str, outcome: str, seconds: float) -> None:
        """One answered request; `outcome` is `ok` or the typed error's code."""
        self.verb_seconds.labels(self.service, verb, outcome).observe(seconds)
        if outcome != "ok":
            self.verb_errors.labels(self.service, verb, outcome).inc()

    def render(self) -> str:
        return prometheus_client.generate_latest(self.registry).decode()

    def scrape_answer(self) -> bytes:
        """The reply to a METRICS_SUBJECT request: who answers and its exposition text."""
        return json.dumps({"service": self.service, "replica": replica_id(), "text": self.render()}).encode()


def parse_answer(body: bytes) -> dict[str, Any]:
    """A service's scrape answer; ValueError when it is not one."""
    answer = json.loads(body)
    if not isinstance(answer, dict) or not {"service", "replica", "text"} <= set(answer):
        raise ValueError("not a metrics answer")
    return answer


__all__ = ["LATENCY_BUCKETS", "METRICS_SUBJECT", "ServiceMetrics", "parse_answer", "replica_id"]
