"""Every NATS subject name, versioned and carrying the org.

Requests: `echo.v1.<org>.<service>.<verb>`; events: `echo.v1.<org>.events.<kind>`.
Subscribers use the `{org}` placeholder form, which FastStream turns into a `*` wildcard and hands
to the handler as a path parameter.
"""

from __future__ import annotations

import re

VERSION = "v1"
PREFIX = f"echo.{VERSION}"
EVENTS_STREAM = "ECHO_EVENTS"
ORGS_BUCKET = "echo-orgs"

# Which service answers which verb. Tool names double as verbs.
SERVICES: dict[str, tuple[str, ...]] = {
    "writes": (
        "write_episode",
        "record_recall_save",
        "pending_documents",
        "mark_ingested",
        "register_documents",
        "token_create",
        "token_verify",
        "token_list",
        "token_revoke",
        "scope_create",
        "status",
        "import_episodes",
    ),
    "retrieval": ("query_memory",),
    "causal": ("trace_cause",),
    "audit": ("get_audit_log", "why", "export", "import_stage", "import"),
    "reindex": ("reindex", "lexical_status"),
    "consolidation": ("consolidate",),
}

TOOL_SERVICE: dict[str, str] = {
    "write_episode": "writes",
    "query_memory": "retrieval",
    "record_recall_save": "writes",
    "pending_documents": "writes",
    "mark_ingested": "writes",
    "trace_cause": "causal",
    "get_audit_log": "audit",
}

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
