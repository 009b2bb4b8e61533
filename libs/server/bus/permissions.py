"""Who may publish and subscribe to what on the bus: one user per process kind, least privilege.

- a service subscribes only to its own request subjects (every org), answers on the requester's
  reply subject (`allow_responses`), and reads the org registry (KV `echo-orgs`); the writes
  service also publishes outbox events to the ECHO_EVENTS stream;
- the edge may only send requests for the verbs behind its tools (and token verification);
- the admin (the CLI, the supervisor, the operator) may send every verb and manage JetStream.

Each user receives replies only on its own inbox prefix (libs/server/bus/auth.py). The supervisor turns
this table into nats-server's `authorization` block; the Helm chart carries the same rules.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from echo_memory.libs.core.contracts.subjects import (
    CONSOLIDATION_CONSUMER,
    EVENTS_STREAM,
    GRAPH_MIRROR_CONSUMER,
    METRICS_SUBJECT,
    ORGS_BUCKET,
    PREFIX,
    SERVICES,
)
from echo_memory.libs.server.bus.auth import inbox_prefix

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
    ("consolidation", "brief"),
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
# Erasure (forget_finish): read the org's events one by one and delete those naming erased rows.
EVENTS_ERASE = (
    f"$JS.API.STREAM.MSG.GET.{EVENTS_STREAM}",
    f"$JS.API.STREAM.MSG.DELETE.{EVENTS_STREAM}",
)


def events_consume(consumer: str) -> tuple[str, ...]:
    """A service's pull consumer `consumer` of ECHO_EVENTS: create or bind it, fetch, acknowledge."""
    return (
        f"$JS.API.STREAM.INFO.{EVENTS_STREAM}",
        "$JS.API.STREAM.NAMES",
        f"$JS.API.CONSUMER.INFO.{EVENTS_STREAM}.{consumer}",
        f"$JS.API.CONSUMER.CREATE.{EVENTS_STREAM}.>",
        f"$JS.API.CONSUMER.CREATE.{EVENTS_STREAM}",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{EVENTS_STREAM}.{consumer}",
        f"$JS.API.CONSUMER.MSG.NEXT.{EVENTS_STREAM}.{consumer}",
        f"$JS.ACK.{EVENTS_STREAM}.{consumer}.>",
    )


# Who consumes ECHO_EVENTS: the reindex service (the AGE graph mirror) and consolidation (which
# scopes changed).
EVENTS_CONSUMERS = {"reindex": GRAPH_MIRROR_CONSUMER, "consolidation": CONSOLIDATION_CONSUMER}


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
    publish += list(EVENTS_ERASE) if user == "writes" else []
    publish += list(events_consume(EVENTS_CONSUMERS[user])) if user in EVENTS_CONSUMERS else []
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


# The chart's copy of the table (charts/echo-memory/files/): its templates build NATS's users from it.
CHART_PERMISSIONS = Path(__file__).resolve().parents[3] / "charts" / "echo-memory" / "files" / "nats-permissions.json"


def permission_table_json() -> str:
    """Every bus user's permissions as the chart keeps them: JSON `{"users": {user: permissions}}`."""
    table = {"users": {user: permissions(user) for user in bus_users()}}
    header = "generated by `python -m echo_memory.libs.server.bus.permissions` from libs/server/bus/permissions.py; do not edit"
    return json.dumps({"_comment": header, **table}, indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    """`python -m echo_memory.libs.server.bus.permissions [--check]`: rewrite the chart's copy, or exit 1 when it differs."""
    wanted = permission_table_json()
    current = CHART_PERMISSIONS.read_text() if CHART_PERMISSIONS.exists() else ""
    if argv[1:] == ["--check"]:
        if current != wanted:
            print(f"{CHART_PERMISSIONS} differs from libs/server/bus/permissions.py; "
                  "run `python -m echo_memory.libs.server.bus.permissions`",
                  file=sys.stderr)
            return 1
        return 0
    CHART_PERMISSIONS.write_text(wanted)
    return 0


__all__ = [
    "ADMIN_USER", "CHART_PERMISSIONS", "EDGE_USER", "EDGE_VERBS", "authorization", "bus_users", "permission_table_json",
    "permissions", "request_pattern",
]

if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
