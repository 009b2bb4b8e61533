"""Every NATS subject name, versioned and carrying the org.

Requests: `echo.v1.<org>.<service>.<verb>`; events: `echo.v1.<org>.events.<kind>`.
Subscribers use the `{org}` placeholder form, which FastStream turns into a `*` wildcard and hands
to the handler as a path parameter.
"""

from __future__ import annotations

import re

from echo_memory.libs.core.contracts.verbs import VERBS

VERSION = "v1"
PREFIX = f"echo.{VERSION}"
EVENTS_STREAM = "ECHO_EVENTS"
# Every service replica answers a request here with its metrics (no queue group: all of them answer).
METRICS_SUBJECT = f"{PREFIX}._metrics.scrape"
# The reindex service's durable consumer of ECHO_EVENTS (the AGE graph mirror).
GRAPH_MIRROR_CONSUMER = "graph-mirror"
# The consolidation service's durable consumer of ECHO_EVENTS (which scopes changed).
CONSOLIDATION_CONSUMER = "consolidation"
ORGS_BUCKET = "echo-orgs"

# Which service answers which verb, derived from the one verb table.
SERVICES: dict[str, tuple[str, ...]] = {}
for _verb in VERBS:
    SERVICES.setdefault(_verb.service, ())
    SERVICES[_verb.service] += (_verb.name,)

_ORG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def valid_org(org: str) -> bool:
    """Org names are DNS-label-like so they are safe as one subject token and a k8s name."""
    return bool(_ORG_RE.match(org))


def request_subject(org: str, service: str, verb: str) -> str:
    """The subject a caller sends `verb` to for `org`."""
    if not valid_org(org):
        raise ValueError(f"invalid org name {org!r}")
    if verb not in SERVICES.get(service, ()):
        raise ValueError(f"service {service!r} has no verb {verb!r}")
    return f"{PREFIX}.{org}.{service}.{verb}"


def subscribe_pattern(service: str, verb: str) -> str:
    """The subscriber pattern for `verb`, with the org as a path parameter."""
    return f"{PREFIX}.{{org}}.{service}.{verb}"


def event_subject(org: str, kind: str) -> str:
    """The JetStream subject of an event, e.g. `fact.created`."""
    return f"{PREFIX}.{org}.events.{kind}"


def queue_group(service: str) -> str:
    """Replicas of one service share one queue group, so each request reaches one of them."""
    return f"echo-{service}"
