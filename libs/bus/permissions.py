"""Who may publish and subscribe to what on the bus: one user per process kind, least privilege.

- a service subscribes only to its own request subjects (every org), answers on the requester's
  reply subject (`allow_responses`), and reads the org registry (KV `echo-orgs`); the writes
  service also publishes outbox events to the ECHO_EVENTS stream;
- the edge may only send requests for the verbs behind its tools (and token verification);
- the admin (the CLI, the supervisor, the operator) may send every verb and manage JetStream.

Each user receives replies only on its own inbox prefix (libs/bus/auth.py). The supervisor turns
this table into nats-server's `authorization` block; the Helm chart carries the same rules.
"""

from __future__ import annotations

from typing import Any

from libs.bus.auth import inbox_prefix
from libs.contracts.subjects import EVENTS_STREAM, GRAPH_MIRROR_CONSUMER, METRICS_SUBJECT, ORGS_BUCKET, PREFIX, SERVICES

ADMIN_USER = "admin"
EDGE_USER = "edge"
# The verbs behind the edge's tools plus the token check; the edge may send nothing else.
EDGE_VERBS: tuple[tuple[str, str], ...] = (
    ("writes", "write_episode"),
    ("writes", "record_recall_save"),
    ("writes", "pending_documents"),
    ("writes", "mark_ingested"),
    ("writes", "pending_episodes"),
    ("writes", "mark_distilled"),
    ("writes", "token_verify"),
    ("retrieval", "query_memory"),
    ("causal", "trace_cause"),
    ("audit", "get_audit_log"),
)

_KV_STREAM = f"KV_{ORGS_BUCKET}"
REGISTRY_READ = (
    f"$JS.API.STREAM.INFO.{_KV_STREAM}",
    f"$JS.API.DIRECT.GET.{_KV_STREAM}.>",
    f"$JS.API.STREAM.MSG.GET.{_KV_STREAM}",
)
EVENTS_PUBLISH = (
    f"{PREFIX}.*.events.>",
    f"$JS.API.STREAM.INFO.{EVENTS_STREAM}",
    f"$JS.API.STREAM.CREATE.{EVENTS_STREAM}",
)

# The reindex service's pull consumer of ECHO_EVENTS: create or bind it, fetch, acknowledge.
EVENTS_CONSUME = (
    f"$JS.API.STREAM.INFO.{EVENTS_STREAM}",
    "$JS.API.STREAM.NAMES",
    f"$JS.API.CONSUMER.INFO.{EVENTS_STREAM}.{GRAPH_MIRROR_CONSUMER}",
    f"$JS.API.CONSUMER.CREATE.{EVENTS_STREAM}.>",
    f"$JS.API.CONSUMER.CREATE.{EVENTS_STREAM}",
    f"$JS.API.CONSUMER.DURABLE.CREATE.{EVENTS_STREAM}.{GRAPH_MIRROR_CONSUMER}",
    f"$JS.API.CONSUMER.MSG.NEXT.{EVENTS_STREAM}.{GRAPH_MIRROR_CONSUMER}",
    f"$JS.ACK.{EVENTS_STREAM}.{GRAPH_MIRROR_CONSUMER}.>",
)


def request_pattern(service: str, verb: str) -> str:
    """The subject of `verb` for any org."""
    return f"{PREFIX}.*.{service}.{verb}"


def bus_users() -> tuple[str, ...]:
    """Every user of the bus: each service, the edge, the admin."""
    return (*SERVICES, EDGE_USER, ADMIN_USER)


def permissions(user: str) -> dict[str, Any]:
    """nats-server permissions of `user` (the `permissions` value of one `authorization.users` entry)."""
    replies = f"{inbox_prefix(user)}.>"
    if user == ADMIN_USER:
        every_verb = [request_pattern(s, v) for s, verbs in SERVICES.items() for v in verbs]
        return {
            "publish": {"allow": [*every_verb, "$JS.API.>", f"$KV.{ORGS_BUCKET}.>"]},
            "subscribe": {"allow": [replies]},
        }
    if user == EDGE_USER:
        return {
            "publish": {"allow": [*(request_pattern(s, v) for s, v in EDGE_VERBS), METRICS_SUBJECT]},
            "subscribe": {"allow": [replies]},
        }
    if user not in SERVICES:
        raise KeyError(f"no bus user {user!r}; users are {', '.join(bus_users())}")
    publish = list(REGISTRY_READ) + (list(EVENTS_PUBLISH) if user == "writes" else [])
    publish += list(EVENTS_CONSUME) if user == "reindex" else []
    return {
        "publish": {"allow": publish},
        "subscribe": {"allow": [f"{PREFIX}.*.{user}.>", METRICS_SUBJECT, replies]},
        "allow_responses": True,
    }


def authorization(passwords: dict[str, str]) -> dict[str, Any]:
    """The `authorization` block for nats-server: every user in `passwords` with its permissions."""
    return {
        "users": [
            {"user": user, "password": password, "permissions": permissions(user)}
            for user, password in passwords.items()
        ]
    }


__all__ = ["ADMIN_USER", "EDGE_USER", "EDGE_VERBS", "authorization", "bus_users", "permissions", "request_pattern"]
