"""`install`, `uninstall`, `adopt`, `connect`, `bridge`: wiring MCP clients to Echo Memory.

Every command that edits files shows the unified diff first (tokens masked) and writes only after
"y" on stdin or `--yes`; each existing file is backed up next to itself and replaced atomically.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from libs import eventloop
from libs.config import Settings

LOCAL_NOTE = "the local system (`echo-memory up`), over stdio"


def register(sub: Any) -> None:
    from libs.clients import CLIENTS

    names = sorted(CLIENTS)
    install = sub.add_parser("install", help="wire one MCP client to Echo Memory (shows the diff first)")
    install.add_argument("--for", dest="client", required=True, choices=names)
    _scope_args(install)
    install.add_argument("--token", help="use this token instead of issuing one for the client's agent id")
    install.set_defaults(func=install_cmd)

    uninstall = sub.add_parser("uninstall", help="remove exactly what install added for a client")
    uninstall.add_argument("--for", dest="client", required=True, choices=names)
    _scope_args(uninstall)
    uninstall.set_defaults(func=uninstall_cmd)

    adopt = sub.add_parser("adopt", help="wire every MCP client found on this machine, one agent id each")
    adopt.add_argument("--yes", action="store_true", help="write without asking")
    adopt.set_defaults(func=adopt_cmd)

    connect = sub.add_parser("connect", help="use a remote edge (URL TOKEN) or, with --local, this machine's system")
    connect.add_argument("url", nargs="?")
    connect.add_argument("token", nargs="?")
    connect.add_argument("--local", action="store_true", help="forget the remote edge")
    connect.add_argument("--no-check", action="store_true", help="save without contacting the edge")
    connect.set_defaults(func=connect_cmd)

    bridge = sub.add_parser("bridge", help="stdio MCP server that forwards to the connected remote edge")
    bridge.set_defaults(func=bridge_cmd)


def _scope_args(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--project", metavar="PATH", help="the project's config files (token from $ECHO_MEMORY_TOKEN)")
    where.add_argument("--global", dest="global_", action="store_true", help="the user's config files (default)")
    parser.add_argument("--yes", action="store_true", help="write without asking")


def _err(message: str) -> int:
    print(f"echo-memory: {message}", file=sys.stderr)
    return 1


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def _local_env(settings: Settings) -> dict[str, str]:
    """What `echo-memory mcp` needs, besides the token, to find this system from a client's process."""
    env: dict[str, str] = {}
    for name in ("ECHO_MEMORY_HOME", "ECHO_MEMORY_ORG", "ECHO_MEMORY_NATS_URL"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


def _connection(settings: Settings):  # type: ignore[no-untyped-def]
    from libs.clients import Connection, echo_memory_command, load_remote

    remote = load_remote()
    if remote is not None:
        return Connection(kind="http", url=remote.url), remote
    return Connection(kind="stdio", command=echo_memory_command(), env=_local_env(settings)), None


async def _issue(settings: Settings, agent_id: str) -> tuple[str, str]:
    from libs.cli.connection import admin_call
    from libs.contracts.admin import TokenCreateResult
    from libs.store.access import DEFAULT_GRANTS

    raw = await admin_call(settings, "writes", "token_create",
                           {"agent_id": agent_id, "read_scopes": list(DEFAULT_GRANTS), "write_scopes": list(DEFAULT_GRANTS)})
    created = TokenCreateResult.model_validate(raw)
    return created.token, created.token_id


async def _revoke(settings: Settings, token_ids: list[str]) -> None:
    from libs.cli.connection import admin_call

    for token_id in token_ids:
        await admin_call(settings, "writes", "token_revoke", {"token_id": token_id})


def _revoke_unwritten(settings: Settings, issued: list[str]) -> None:
    """Revoke the tokens this command issued when no config file ended up holding them (none: no-op)."""
    if issued:
        eventloop.run(_revoke(settings, issued), use_uvloop=settings.uvloop)


def _confirm_and_apply(changes: list, yes: bool) -> int | None:  # type: ignore[type-arg]
    """Show the diff and write on confirmation. Returns 0 (written or nothing to do), 1 (declined)."""
    from libs.clients import apply_changes

    pending = [c for c in changes if c.changed]
    if not pending:
        print("echo-memory: already up to date; nothing to change")
        return 0
    for change in pending:
        print(f"# {change.what}")
        sys.stdout.write(change.diff())
    if not yes:
        print("Write these changes? [y/N] ", end="", flush=True)
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            print("echo-memory: nothing was written")
            return 1
    backups = apply_changes(pending)
    for change in pending:
        print(f"{'removed' if change.after is None else 'wrote'} {change.path}")
    for backup in backups:
        print(f"backup  {backup}")
    return 0


def _apply_or_revoke(settings: Settings, changes: list, yes: bool, issued: list[str]) -> int:  # type: ignore[type-arg]
    """Write `changes` on confirmation; when nothing was written, revoke the tokens issued for them.

    Returns 0 when written (or nothing to do), 1 when declined or a file could not be written.
    """
    from libs.clients import ConfigError

    try:
        code = _confirm_and_apply(changes, yes)
    except ConfigError as exc:
        code = _err(str(exc))
    if code:
        _revoke_unwritten(settings, issued)  # nothing was written
    return code or 0


def install_cmd(settings: Settings, args: argparse.Namespace) -> int:
    """Plan, show and write one client's MCP entry and instructions."""
    from libs.cli.connection import NotRunning
    from libs.clients import CLIENTS, ConfigError, existing_token, plan_install
    from libs.contracts.errors import EchoError

    client = CLIENTS[args.client]
    home = _home()
    project = Path(args.project).resolve() if args.project else None
    issued: list[str] = []
    try:
        conn, remote = _connection(settings)
        token: str | None = None
        if project is None:
            if args.token:
                token = args.token
            elif remote is not None:
                token = remote.token
            else:
                token = existing_token(client, home, None)
                if token is None:
                    token, token_id = eventloop.run(_issue(settings, client.agent_id), use_uvloop=settings.uvloop)
                    issued.append(token_id)
        changes = plan_install(client, home, project, conn, token)
    except (ConfigError, EchoError, NotRunning) as exc:
        _revoke_unwritten(settings, issued)  # planning failed after the token was issued
        return _err(getattr(exc, "message", None) or str(exc))
    print(f"echo-memory: {client.label} → {remote.url if remote else LOCAL_NOTE}"
          + (f" as agent '{client.agent_id}'" if issued else ""))
    code = _apply_or_revoke(settings, changes, args.yes, issued)
    if code == 0 and project is not None:
        print(f"echo-memory: the project config reads the token from ${'ECHO_MEMORY_TOKEN'}; create one with "
              f"`echo-memory token create --agent {client.agent_id}` and export it")
    return code


def uninstall_cmd(settings: Settings, args: argparse.Namespace) -> int:
    from libs.clients import CLIENTS, ConfigError, plan_uninstall

    client = CLIENTS[args.client]
    project = Path(args.project).resolve() if args.project else None
    try:
        changes = plan_uninstall(client, _home(), project)
        code = _confirm_and_apply(changes, args.yes)
    except ConfigError as exc:
        return _err(str(exc))
    if code == 0:
        print(f"echo-memory: the agent's token stays valid; revoke it with "
              f"`echo-memory token revoke --agent {client.agent_id}`")
    return code or 0


def adopt_cmd(settings: Settings, args: argparse.Namespace) -> int:
    """Find every configured client, give each its own agent id and token, write on confirmation."""
    from libs.cli.connection import NotRunning
    from libs.clients import ConfigError, detect_clients, existing_token, plan_install
    from libs.contracts.errors import EchoError

    home = _home()
    found = detect_clients(home)
    if not found:
        print(f"echo-memory: no MCP client configuration found under {home}")
        return 0
    issued: list[str] = []
    changes = []
    try:
        conn, remote = _connection(settings)
        if remote is not None:
            return _err("adopt issues one token per client as the local admin; with a remote edge, ask its admin "
                        "for a token per client and run `echo-memory install --for CLIENT --token TOKEN`")
        for client in found:
            token = existing_token(client, home, None)
            note = "keeps its token"
            if token is None:
                token, token_id = eventloop.run(_issue(settings, client.agent_id), use_uvloop=settings.uvloop)
                issued.append(token_id)
                note = "new token"
            print(f"echo-memory: {client.label}: agent '{client.agent_id}' ({note})")
            changes += plan_install(client, home, None, conn, token)
    except (ConfigError, EchoError, NotRunning) as exc:
        _revoke_unwritten(settings, issued)
        return _err(getattr(exc, "message", None) or str(exc))
    return _apply_or_revoke(settings, changes, args.yes, issued)


def connect_cmd(settings: Settings, args: argparse.Namespace) -> int:
    from libs.clients import ConfigError, save_remote, validate_remote
    from libs.clients.remote import remote_path

    if args.local:
        if args.url or args.token:
            return _err("connect --local takes no URL or token")
        existed = remote_path().exists()
        save_remote(None)
        print("echo-memory: using the local system" + ("" if existed else " (it already was)"))
        print("echo-memory: re-run `echo-memory install --for CLIENT` (or `adopt`) to point clients back at it")
        return 0
    if not args.url or not args.token:
        return _err("usage: echo-memory connect URL TOKEN   (or: echo-memory connect --local)")
    try:
        remote = validate_remote(args.url, args.token)
    except ConfigError as exc:
        return _err(str(exc))
    if not args.no_check:
        problem = eventloop.run(_check_edge(remote.url, remote.token), use_uvloop=settings.uvloop)
        if problem:
            return _err(f"{problem}; nothing was saved (use --no-check to save anyway)")
    save_remote(remote)
    print(f"echo-memory: connected to {remote.url} (org '{remote.org}'); saved in {remote_path()}")
    print("echo-memory: run `echo-memory install --for CLIENT` to point a client at it")
    return 0


async def _check_edge(url: str, token: str) -> str | None:
    """None when the edge accepts the token for an MCP initialize, else what went wrong."""
    import httpx2

    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "echo-memory-connect", "version": "1"}}}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    try:
        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.post(url, json=body, headers=headers)
    except httpx2.HTTPError as exc:
        return f"cannot reach {url} ({type(exc).__name__})"
    if response.status_code == 401:
        return "the edge refused the token (unknown, revoked, or for another org)"
    if response.status_code != 200:
        return f"the edge answered HTTP {response.status_code}"
    return None


def bridge_cmd(settings: Settings, args: argparse.Namespace) -> int:
    from libs.clients import ConfigError, load_remote
    from libs.service.registry import edge_entry

    serve_bridge = edge_entry("serve_bridge")

    try:
        remote = load_remote()
    except ConfigError as exc:
        return _err(str(exc))
    if remote is None:
        return _err("no remote edge is connected; run `echo-memory connect URL TOKEN` (locally use `echo-memory mcp`)")
    token = os.environ.get("ECHO_MEMORY_TOKEN") or remote.token
    return int(eventloop.run(serve_bridge(remote.url, token), use_uvloop=settings.uvloop))
