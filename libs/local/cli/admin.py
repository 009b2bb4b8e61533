"""`init-db`, `token`, `scope`, `mcp`: commands that act on one org."""

from __future__ import annotations

import argparse
import sys

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pydantic import SecretStr

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.admin import (
    NoArgs,
    ScopeCreateInput,
    ScopeListResult,
    ScopeNameInput,
    ScopeShowResult,
    TokenCreateInput,
    TokenGrantInput,
    TokenInfo,
    TokenRevokeInput,
)
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.core.contracts.verbs import (
    SCOPE_CREATE,
    SCOPE_DELETE,
    SCOPE_LIST,
    SCOPE_SHOW,
    TOKEN_CREATE,
    TOKEN_GRANT,
    TOKEN_LIST,
    TOKEN_REVOKE,
)
from echo_memory.libs.local.connection import START_HINT, NotRunning, admin_command, nats_url
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


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def token(settings: Settings, args: argparse.Namespace) -> int:
    """`token create|list|grant|revoke`: 0 on success, 1 when the system refused or cannot be reached (the reason on stderr)."""
    if args.token_command == "create":
        created = admin_command(settings, TOKEN_CREATE, TokenCreateInput(
            agent_id=args.agent, read_scopes=_split(args.read), write_scopes=_split(args.write)), "token create")
        if created is None:
            return 1
        print(f"token for agent '{created.agent_id}' (id {created.token_id}); it is shown only once:")
        print(created.token)
        return 0
    if args.token_command == "list":
        listed = admin_command(settings, TOKEN_LIST, NoArgs(), "token list")
        if listed is None:
            return 1
        for line in render_tokens(listed.tokens):
            print(line)
        return 0
    if args.token_command == "grant":
        granted = admin_command(settings, TOKEN_GRANT, TokenGrantInput(
            token_id=args.token_id, read_scopes=_split(args.read), write_scopes=_split(args.write)), "token grant")
        if granted is None:
            return 1
        added = [f"read {', '.join(granted.added_read)}"] if granted.added_read else []
        added += [f"write {', '.join(granted.added_write)}"] if granted.added_write else []
        print(f"token {granted.token.token_id} (agent '{granted.token.agent_id}'): "
              + (f"may now also {' and '.join(added)}" if added else "already had every grant named; nothing changed"))
        print(f"it may read {','.join(granted.token.read_scopes) or 'nothing'} and write "
              f"{','.join(granted.token.write_scopes) or 'nothing'}; a running edge applies it within 30 s")
        return 0
    revoked = admin_command(settings, TOKEN_REVOKE, TokenRevokeInput(token_id=args.token_id, agent_id=args.agent),
                            "token revoke")
    if revoked is None:
        return 1
    print(f"revoked {revoked.revoked} token(s)")
    return 0


def render_tokens(tokens: list[TokenInfo]) -> list[str]:
    """`token list`'s lines: a header and one line per token, or one line saying there are none."""
    if not tokens:
        return ["no tokens; issue one with `echo-memory token create --agent NAME`"]
    lines = [f"{'ID':<36}  {'PREFIX':<14} {'AGENT':<16} {'READ':<20} {'WRITE':<20} STATE"]
    for info in tokens:
        state = f"revoked {info.revoked_at:%Y-%m-%d}" if info.revoked_at else "active"
        lines.append(f"{info.token_id:<36}  {info.prefix + '…':<14} {info.agent_id:<16} "
                     f"{','.join(info.read_scopes) or '-':<20} {','.join(info.write_scopes) or '-':<20} {state}")
    return lines


def forget_pointer(name: str) -> str:
    """What emptying a scope takes: the erasure command, then `scope delete`."""
    return (f"erasing a scope's memory is `echo-memory forget --scope {name} --confirm`; "
            f"run it first, then `echo-memory scope delete {name}`")


def scope(settings: Settings, args: argparse.Namespace) -> int:
    """`scope create|list|show|delete`: 0 on success, 1 when the system refused or cannot be reached (the reason on stderr)."""
    if args.scope_command == "create":
        result = admin_command(settings, SCOPE_CREATE, ScopeCreateInput(name=args.name, description=args.description),
                               "scope create")
        if result is None:
            return 1
        print(f"scope '{result.name}' " + ("created" if result.created else "already exists"))
        return 0
    if args.scope_command == "list":
        scopes = admin_command(settings, SCOPE_LIST, NoArgs(), "scope list")
        if scopes is None:
            return 1
        for line in render_scopes(scopes):
            print(line)
        return 0
    if args.scope_command == "show":
        shown = admin_command(settings, SCOPE_SHOW, ScopeNameInput(name=args.name), "scope show")
        if shown is None:
            return 1
        for line in render_scope(shown):
            print(line)
        return 0
    if args.erase:
        # Erasure has one path, with its own confirmation; this command never erases.
        print(f"echo-memory scope delete: --erase does not erase; {forget_pointer(args.name)}", file=sys.stderr)
        return 1
    deleted = admin_command(settings, SCOPE_DELETE, ScopeNameInput(name=args.name), "scope delete")
    if deleted is None:
        return 1
    print(f"scope '{deleted.name}' deleted" + (f"; its name was taken out of {deleted.tokens_updated} token(s)' grants"
                                                if deleted.tokens_updated else ""))
    return 0


def render_scopes(result: ScopeListResult) -> list[str]:
    """`scope list`'s lines: a header, then one line per scope (`shared` always exists)."""
    lines = [f"{'NAME':<24} {'KIND':<6} {'FACTS':>7} {'ACTIVE':>7} {'EPISODES':>8}  {'CREATED':<10}  DESCRIPTION"]
    for s in result.scopes:
        lines.append(f"{s.name:<24} {s.kind:<6} {s.facts:>7} {s.active_facts:>7} {s.episodes:>8}  "
                     f"{s.created_at:%Y-%m-%d}  {s.description}")
    return lines


def render_scope(result: ScopeShowResult) -> list[str]:
    """`scope show`'s lines: the scope, its reader and writer lists, and the live tokens that may use it."""
    s = result.scope
    lines = [f"scope {s.name} ({s.kind}): {s.description or 'no description'}",
             f"  {s.facts} facts ({s.active_facts} active), {s.episodes} episodes, created {s.created_at:%Y-%m-%d}",
             f"  readers: {', '.join(result.readers)}  (`*` is every agent)",
             f"  writers: {', '.join(result.writers)}"]
    if not result.tokens:
        lines.append("  no live token may read or write it")
        return lines
    lines.append(f"  {'TOKEN ID':<36}  {'AGENT':<16} READ  WRITE")
    for t in result.tokens:
        lines.append(f"  {t.token_id:<36}  {t.agent_id:<16} {'yes' if t.read else 'no':<5} {'yes' if t.write else 'no'}")
    return lines


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
