"""`init-db`, `token`, `scope`, `mcp`: commands that act on one org."""

from __future__ import annotations

import argparse
import sys

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pydantic import SecretStr

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.admin import (
    ScopeCreateResult,
    TokenCreateResult,
    TokenListResult,
    TokenRevokeResult,
)
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.local.cli.connection import START_HINT, NotRunning, admin_call, nats_url
from echo_memory.libs.local.supervisor.bus_auth import process_credentials
from echo_memory.libs.local.supervisor.follow import follow_supervisor_nats
from echo_memory.libs.local.supervisor.postgres import EmbeddedPostgres
from echo_memory.libs.local.supervisor.state import read_state
from echo_memory.libs.server import eventloop
from echo_memory.libs.server.bus.auth import BusAccess, CredentialsError
from echo_memory.libs.server.bus.permissions import EDGE_USER
from echo_memory.libs.server.store.schema import apply_migrations, schema_version

DB_CONNECT_TIMEOUT_SECONDS = 10


def _database_url(settings: Settings) -> str | None:
    if settings.database_url is not None:
        return settings.database_url.get_secret_value()
    state = read_state(settings.home.expanduser())
    if state is None or state.pg_port is None:
        return None
    return EmbeddedPostgres(settings.home.expanduser() / "postgres", state.pg_port).url()


def init_db(settings: Settings) -> int:
    """Apply pending migrations; prints each one applied, or that the schema is up to date."""
    url = _database_url(settings)
    if url is None:
        print("echo-memory: set ECHO_MEMORY_DATABASE_URL, or start the embedded system with `echo-memory up`",
              file=sys.stderr)
        return 2
    # libpq waits for the operating system's TCP time-out (minutes) on a host that never answers.
    url = make_conninfo(url, connect_timeout=DB_CONNECT_TIMEOUT_SECONDS)
    try:
        applied = apply_migrations(url)
        version = schema_version(url)
    except EchoError as exc:
        print(f"echo-memory init-db: {exc.message}", file=sys.stderr)
        return 1
    except psycopg.OperationalError as exc:
        print(f"echo-memory init-db: cannot use the database at {_where(url)} ({_reason(exc)}); check "
              f"ECHO_MEMORY_DATABASE_URL, or for the embedded system {START_HINT}", file=sys.stderr)
        return 1
    for name in applied:
        print(f"applied {name}")
    print(f"schema version {version}" + ("" if applied else " (already up to date)"))
    return 0


def _reason(exc: psycopg.OperationalError) -> str:
    # libpq's text is several lines: "connection failed: connection to server at ... failed: WHY", then hints.
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return " ".join(first.rsplit("failed: ", 1)[-1].split())


def _where(url: str) -> str:
    """host:port of a connection string, never its user or password."""
    parts = conninfo_to_dict(url)
    return f"{parts.get('host') or 'localhost'}:{parts.get('port') or 5432}"


def _call(settings: Settings, service: str, verb: str, args: dict[str, object]) -> dict[str, object] | None:
    try:
        return eventloop.run(admin_call(settings, service, verb, args), use_uvloop=settings.uvloop)
    except EchoError as exc:  # NotRunning and BusUnreachable among them
        print(f"echo-memory: {exc.message}", file=sys.stderr)
        return None


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def token(settings: Settings, args: argparse.Namespace) -> int:
    if args.token_command == "create":
        raw = _call(settings, "writes", "token_create",
                    {"agent_id": args.agent, "read_scopes": _split(args.read), "write_scopes": _split(args.write)})
        if raw is None:
            return 1
        created = TokenCreateResult.model_validate(raw)
        print(f"token for agent '{created.agent_id}' (id {created.token_id}); it is shown only once:")
        print(created.token)
        return 0
    if args.token_command == "list":
        raw = _call(settings, "writes", "token_list", {})
        if raw is None:
            return 1
        for info in TokenListResult.model_validate(raw).tokens:
            state = f"revoked {info.revoked_at:%Y-%m-%d}" if info.revoked_at else "active"
            print(f"{info.token_id}  {info.prefix}…  {info.agent_id:<16} read={','.join(info.read_scopes)} "
                  f"write={','.join(info.write_scopes)}  {state}")
        return 0
    raw = _call(settings, "writes", "token_revoke", {"token_id": args.token_id, "agent_id": args.agent})
    if raw is None:
        return 1
    print(f"revoked {TokenRevokeResult.model_validate(raw).revoked} token(s)")
    return 0


def scope(settings: Settings, args: argparse.Namespace) -> int:
    raw = _call(settings, "writes", "scope_create", {"name": args.name, "description": args.description})
    if raw is None:
        return 1
    result = ScopeCreateResult.model_validate(raw)
    print(f"scope '{result.name}' " + ("created" if result.created else "already exists"))
    return 0


def mcp_stdio(settings: Settings, token_value: str | None) -> int:
    from echo_memory.libs.server.service.registry import entry_point

    serve_stdio = entry_point("serve_stdio")
    try:
        url = nats_url(settings)
    except NotRunning as exc:
        print(f"echo-memory mcp: {exc}", file=sys.stderr)
        return 2
    try:
        bus = stdio_bus_access(settings, url)
    except CredentialsError as exc:
        print(f"echo-memory mcp: {exc}", file=sys.stderr)
        return 2
    updates: dict[str, object] = {"nats_url": url}
    if token_value:
        updates["token"] = SecretStr(token_value)
    served = serve_stdio(settings.model_copy(update=updates), bus=bus)
    return int(eventloop.run(served, use_uvloop=settings.uvloop))


def stdio_bus_access(settings: Settings, url: str) -> BusAccess:
    """The stdio edge's way onto the bus at `url`: the edge's credentials of the embedded system
    (or the configured ones), and, when `url` is the supervisor's NATS, a follower that re-aims the
    connection if a later `up` moves NATS to another port."""
    home = settings.home.expanduser()
    return BusAccess(
        credentials=process_credentials(settings, EDGE_USER, url),
        follow=lambda connection: follow_supervisor_nats(connection, home, url),
    )
