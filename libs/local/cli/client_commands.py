"""`install`, `uninstall`, `adopt`, `connect`, `bridge`: wiring MCP clients to Echo Memory.

Every command that edits files shows the unified diff first (tokens masked) and writes only after
"y" on stdin or `--yes`; each existing file is backed up next to itself and replaced atomically.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from echo_memory.libs.core.config import Settings
from echo_memory.libs.server import eventloop

LOCAL_NOTE = "the local system (`echo-memory up`), over stdio"


def register(sub: Any) -> None:
    from echo_memory.libs.local.clients import CLIENTS

    names = sorted(CLIENTS)
    install = sub.add_parser(
        "install",
        help="wire MCP clients to Echo Memory: --for CLIENT, or --global alone for every client found "
             "(MCP entry, instructions, skill, hooks; shows the diff first)",
    )
    install.add_argument("--for", dest="client", choices=names, help="one client only (default: every client found)")
    _scope_args(install)
    install.add_argument("--token", help="use this token instead of issuing one for the client's agent id")
    install.add_argument("--no-hooks", action="store_true", help="leave the client's hook files alone")
    install.set_defaults(func=install_cmd)

    uninstall = sub.add_parser("uninstall", help="remove exactly what install added for a client")
    uninstall.add_argument("--for", dest="client", required=True, choices=names, help="the client to remove it from")
    _scope_args(uninstall)
    uninstall.set_defaults(func=uninstall_cmd)

    adopt = sub.add_parser("adopt", help="the same as `install --global`: every client found, one agent id each")
    adopt.add_argument("--yes", action="store_true", help="write without asking")
    adopt.add_argument("--no-hooks", action="store_true", help="leave the clients' hook files alone")
    adopt.set_defaults(func=adopt_cmd)

    connect = sub.add_parser("connect", help="use a remote edge (URL TOKEN) or, with --local, this machine's system")
    connect.add_argument("url", nargs="?", help="the remote edge's MCP URL")
    connect.add_argument("token", nargs="?", help="an agent token the remote edge issued")
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


def _connection(settings: Settings, project: Path | None = None):  # type: ignore[no-untyped-def]
    """(Connection, RemoteEdge or None). Project files get the bare command on PATH and no machine paths."""
    from echo_memory.libs.local.clients import Connection, echo_memory_command, load_remote
    from echo_memory.libs.local.clients.plan import PROJECT_COMMAND

    remote = load_remote()
    if remote is not None:
        return Connection(kind="http", url=remote.url), remote
    if project is not None:
        return Connection(kind="stdio", command=PROJECT_COMMAND), None
    return Connection(kind="stdio", command=echo_memory_command(), env=_local_env(settings)), None


async def _issue(settings: Settings, agent_id: str) -> tuple[str, str]:
    from echo_memory.libs.core.contracts.admin import TokenCreateInput
    from echo_memory.libs.core.contracts.verbs import TOKEN_CREATE
    from echo_memory.libs.local.connection import admin_call
    from echo_memory.libs.server.store.access import DEFAULT_GRANTS

    request = TokenCreateInput(agent_id=agent_id, read_scopes=list(DEFAULT_GRANTS), write_scopes=list(DEFAULT_GRANTS))
    created = await admin_call(settings, TOKEN_CREATE, request)
    return created.token, created.token_id


async def _revoke(settings: Settings, token_ids: list[str]) -> None:
    from echo_memory.libs.core.contracts.admin import TokenRevokeInput
    from echo_memory.libs.core.contracts.verbs import TOKEN_REVOKE
    from echo_memory.libs.local.connection import admin_call

    for token_id in token_ids:
        await admin_call(settings, TOKEN_REVOKE, TokenRevokeInput(token_id=token_id))


def _revoke_unwritten(settings: Settings, issued: list[str]) -> None:
    """Revoke the tokens this command issued when no config file ended up holding them (none: no-op)."""
    if issued:
        eventloop.run(_revoke(settings, issued), use_uvloop=settings.uvloop)


async def _revoke_token(settings: Settings, token: str) -> str:
    """Revoke `token` on the local system; returns what happened, as a sentence part."""
    from echo_memory.libs.core.contracts.admin import TokenRevokeInput, TokenVerifyInput
    from echo_memory.libs.core.contracts.tokens import hash_token
    from echo_memory.libs.core.contracts.verbs import TOKEN_REVOKE, TOKEN_VERIFY
    from echo_memory.libs.local.connection import admin_call

    verified = await admin_call(settings, TOKEN_VERIFY, TokenVerifyInput(token_hash=hash_token(token)))
    if not verified.valid or verified.token_id is None:
        return "was already invalid here"
    await admin_call(settings, TOKEN_REVOKE, TokenRevokeInput(token_id=verified.token_id))
    return f"was revoked (token id {verified.token_id})"


def _revoke_replaced(settings: Settings, replaced: dict[str, str]) -> None:
    """Revoke each token a client's file held before this install replaced it with another."""
    from echo_memory.libs.core.contracts.errors import EchoError
    from echo_memory.libs.core.contracts.tokens import org_of
    from echo_memory.libs.local.clients.files import mask_tokens

    for label, token in replaced.items():
        shown = mask_tokens(token)
        if org_of(token) != settings.org:
            print(f"echo-memory: {label}: the token it held before ({shown}) belongs to another system; "
                  "revoke it there")
            continue
        try:
            outcome = eventloop.run(_revoke_token(settings, token), use_uvloop=settings.uvloop)
        except EchoError as exc:
            outcome = f"could not be revoked ({exc.message}); run `echo-memory token list` and revoke it"
        print(f"echo-memory: {label}: the token it held before ({shown}) {outcome}")


def _confirm_and_apply(changes: list, yes: bool, project: Path | None = None,  # type: ignore[type-arg]
                       *, mask_backups: bool = False) -> int | None:
    """Show the diff and write on confirmation. Returns 0 (written or nothing to do), 1 (declined).

    `mask_backups`: the backups keep every Echo Memory token cut to its prefix (uninstall).
    """
    from echo_memory.libs.local.clients import apply_changes
    from echo_memory.libs.local.clients.remote import config_dir

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
    backups = apply_changes(pending, backup_dir=config_dir() / "backups", project=project, mask_backups=mask_backups)
    for change in pending:
        print(f"{'removed' if change.after is None else 'wrote'} {change.path}")
    for backup in backups:
        print(f"backup  {backup}{' (tokens masked)' if mask_backups else ''}")
    return 0


def _apply_or_revoke(settings: Settings, changes: list, yes: bool, issued: list[str],  # type: ignore[type-arg]
                     project: Path | None = None) -> int:
    """Write `changes` on confirmation; when nothing was written, revoke the tokens issued for them.

    Returns 0 when written (or nothing to do), 1 when declined or a file could not be written.
    """
    from echo_memory.libs.local.clients import ConfigError

    try:
        code = _confirm_and_apply(changes, yes, project)
    except ConfigError as exc:
        code = _err(str(exc))
    if code:
        _revoke_unwritten(settings, issued)  # nothing was written
    return code or 0


class _Tokens:
    """Chooses each client's token: its own agent id, kept across installs and across `connect`."""

    def __init__(self, settings: Settings, home: Path, remote: Any) -> None:
        self.settings, self.home, self.remote = settings, home, remote
        self.issued: list[str] = []  # token ids issued by this command (revoked if nothing is written)
        self.replaced: dict[str, str] = {}  # client label -> token its file held, now replaced
        self.notes: dict[str, str] = {}

    def for_client(self, client: Any, explicit: str | None) -> str:
        """The literal token for `client`'s user-level files.

        Raises:
            ConfigError: a remote edge that accepts neither the client's token nor one issued here.
            EchoError: issuing a token failed (NotRunning, BusUnreachable among them).
        """
        from echo_memory.libs.core.contracts.tokens import org_of
        from echo_memory.libs.local.clients import ConfigError, existing_token

        current = existing_token(client, self.home, None)
        token = explicit
        note = "given token"
        if token is None and current is not None:
            if self.remote is None:
                usable = org_of(current) == self.settings.org
            else:
                usable = eventloop.run(_check_edge(self.remote.url, current), use_uvloop=self.settings.uvloop) is None
            if usable:
                token, note = current, "keeps its token"
        if token is None:
            if self.remote is not None and self.remote.org != self.settings.org:
                raise ConfigError(
                    f"{client.label} needs its own token on {self.remote.url} (org '{self.remote.org}'): ask its "
                    f"admin for `echo-memory token create --agent {client.agent_id}` and run "
                    f"`echo-memory install --for {client.name} --token TOKEN`; nothing was changed")
            token, token_id = eventloop.run(_issue(self.settings, client.agent_id), use_uvloop=self.settings.uvloop)
            self.issued.append(token_id)
            note = "new token"
            if self.remote is not None:
                problem = eventloop.run(_check_edge(self.remote.url, token), use_uvloop=self.settings.uvloop)
                if problem:
                    raise ConfigError(
                        f"the remote edge does not accept a token issued by this machine's system ({problem}); "
                        f"pass {client.label}'s own token with --token; nothing was changed")
        if current is not None and current != token:
            self.replaced[client.label] = current
        self.notes[client.name] = note
        return token


def _hook_url(conn: Any) -> str | None:
    return str(conn.url) if conn.kind == "http" else None


def install_cmd(settings: Settings, args: argparse.Namespace) -> int:
    """Plan, show and write one client's (or, with --global alone, every found client's) files.

    Each client gets its MCP entry under its own agent id, instructions, the echo-memory skill and
    (unless --no-hooks) recall/capture hooks. Returns 0 when written or up to date, 1 otherwise.
    """
    if args.client is None:
        if not args.global_:
            return _err("give --for CLIENT, or --global alone to wire every client found on this machine")
        return _install_all(settings, yes=args.yes, hooks=not args.no_hooks, token=args.token)
    from echo_memory.libs.core.contracts.errors import EchoError
    from echo_memory.libs.local.clients import CLIENTS, ConfigError
    from echo_memory.libs.local.clients.hooks import HOOKS
    from echo_memory.libs.local.clients.plan import (
        PROJECT_COMMAND,
        global_overlap,
        plan_client,
        plan_credentials,
        project_entry_here,
    )
    from echo_memory.libs.local.connection import NotRunning

    client = CLIENTS[args.client]
    home = _home()
    project = Path(args.project).resolve() if args.project else None
    tokens: _Tokens | None = None
    try:
        conn, remote = _connection(settings, project)
        tokens = _Tokens(settings, home, remote)
        token = None if project is not None else tokens.for_client(client, args.token)
        executable = PROJECT_COMMAND if project is not None else _executable()
        changes = plan_client(client, home, project, conn, token, executable, hooks=not args.no_hooks)
        if token is not None and not args.no_hooks and client.name in HOOKS:
            changes += plan_credentials({client.name: (token, _hook_url(conn))}, str(settings.home))
    except (ConfigError, EchoError, NotRunning) as exc:
        _revoke_unwritten(settings, tokens.issued if tokens else [])  # planning failed after a token was issued
        return _err(getattr(exc, "message", None) or str(exc))
    print(f"echo-memory: {client.label} → {remote.url if remote else LOCAL_NOTE}"
          + (f" as agent '{client.agent_id}'" if tokens.issued else ""))
    overlap = global_overlap(client, home, project)
    for line in _overlap_notes(client.label, *overlap):
        print(line)
    if project is None and project_entry_here(client, Path.cwd()):
        print(f"echo-memory: {client.label}: this directory's .mcp.json also has echo-memory (a project install); "
              "here Claude Code sees the name in two scopes. Remove the project's entry with "
              "`echo-memory uninstall --for claude-code --project .` (the global one serves this project too)")
    code = _apply_or_revoke(settings, changes, args.yes, tokens.issued, project)
    if code == 0:
        _revoke_replaced(settings, tokens.replaced)
        if project is not None and not overlap[0]:
            for line in project_needs(client.agent_id, shutil.which(PROJECT_COMMAND)):
                print(line)
        _hook_notes([client.name], args.no_hooks)
    return code


def _overlap_notes(label: str, entry: bool, hook: bool) -> list[str]:
    notes = []
    if entry:
        notes.append(f"echo-memory: {label} already has echo-memory at user scope (global install), which serves every "
                     "project: this project install adds no second entry to .mcp.json (the same name in two scopes "
                     "is a conflict). To give this repository its own entry, "
                     "`echo-memory uninstall --for claude-code --global` first.")
    if hook:
        notes.append(f"echo-memory: {label}'s global recall hook already runs in this project: no second hook added "
                     "(it would recall twice per prompt)")
    return notes


def project_needs(agent_id: str, on_path: str | None) -> list[str]:
    """What a project install needs on each machine that uses it: the token variable and the command."""
    lines = [
        "echo-memory: this project's files need two things wherever the client runs:",
        "  1. ECHO_MEMORY_TOKEN set in the environment that starts the client, e.g.",
        f"       export ECHO_MEMORY_TOKEN=$(echo-memory token create --agent {agent_id} | tail -n 1)",
        "     (unset or empty, the client sends the literal ${ECHO_MEMORY_TOKEN} and is refused with that message)",
        "  2. the `echo-memory` command on the client's PATH (the files name it bare, no path of this machine): "
        + (f"found at {on_path}" if on_path else "NOT on this shell's PATH now; add the directory holding "
           f"{_executable()} to PATH"),
    ]
    return lines


def _executable() -> str:
    from echo_memory.libs.local.clients import echo_memory_command

    return echo_memory_command()


def _hook_notes(names: list[str], no_hooks: bool) -> None:
    if not no_hooks and "codex" in names:
        print("echo-memory: Codex runs new hooks only after you trust them: open `/hooks` in Codex once")


def _install_all(settings: Settings, *, yes: bool, hooks: bool, token: str | None) -> int:
    """Every client found: its own agent id and token, instructions, skill, hooks; one combined diff."""
    from echo_memory.libs.core.contracts.errors import EchoError
    from echo_memory.libs.local.clients import ConfigError, detect_clients
    from echo_memory.libs.local.clients.hooks import HOOKS
    from echo_memory.libs.local.clients.plan import plan_client, plan_credentials
    from echo_memory.libs.local.connection import NotRunning

    if token is not None:
        return _err("--token names one agent; with --global every client gets its own (use --for CLIENT --token)")
    home = _home()
    found = detect_clients(home)
    if not found:
        print(f"echo-memory: no MCP client configuration found under {home}")
        return 0
    changes = []
    tokens: _Tokens | None = None
    try:
        conn, remote = _connection(settings)
        tokens = _Tokens(settings, home, remote)
        credentials: dict[str, tuple[str, str | None] | None] = {}
        for client in found:
            literal = tokens.for_client(client, None)
            print(f"echo-memory: {client.label}: agent '{client.agent_id}' ({tokens.notes[client.name]})")
            changes += plan_client(client, home, None, conn.for_client(client), literal, _executable(), hooks=hooks)
            if hooks and client.name in HOOKS:
                credentials[client.name] = (literal, _hook_url(conn.for_client(client)))
        changes += plan_credentials(credentials, str(settings.home))
    except (ConfigError, EchoError, NotRunning) as exc:
        _revoke_unwritten(settings, tokens.issued if tokens else [])
        return _err(getattr(exc, "message", None) or str(exc))
    code = _apply_or_revoke(settings, changes, yes, tokens.issued)
    if code == 0:
        _revoke_replaced(settings, tokens.replaced)
        _hook_notes([c.name for c in found], not hooks)
    return code


def uninstall_cmd(settings: Settings, args: argparse.Namespace) -> int:
    """Remove exactly what install added for the client (entry, instructions, skill, hooks)."""
    from echo_memory.libs.local.clients import CLIENTS, ConfigError
    from echo_memory.libs.local.clients.plan import plan_client_removal, plan_credentials

    client = CLIENTS[args.client]
    project = Path(args.project).resolve() if args.project else None
    try:
        changes = plan_client_removal(client, _home(), project)
        if project is None:
            changes += [c for c in plan_credentials({client.name: None}, str(settings.home)) if c.before is not None]
        code = _confirm_and_apply(changes, args.yes, project, mask_backups=True)
    except ConfigError as exc:
        return _err(str(exc))
    if code == 0:
        print(f"echo-memory: the agent's token stays valid; revoke it with "
              f"`echo-memory token revoke --agent {client.agent_id}`")
    return code or 0


def adopt_cmd(settings: Settings, args: argparse.Namespace) -> int:
    """`install --global`: every configured client, each with its own agent id and token."""
    return _install_all(settings, yes=args.yes, hooks=not args.no_hooks, token=None)


def connect_cmd(settings: Settings, args: argparse.Namespace) -> int:
    from echo_memory.libs.local.clients import ConfigError, save_remote, validate_remote
    from echo_memory.libs.local.clients.remote import remote_path

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
    from echo_memory.libs.local.clients import ConfigError, load_remote
    from echo_memory.libs.server.service.registry import entry_point

    serve_bridge = entry_point("serve_bridge")

    try:
        remote = load_remote()
    except ConfigError as exc:
        return _err(str(exc))
    if remote is None:
        return _err("no remote edge is connected; run `echo-memory connect URL TOKEN` (locally use `echo-memory mcp`)")
    token = os.environ.get("ECHO_MEMORY_TOKEN") or remote.token
    return int(eventloop.run(serve_bridge(remote.url, token), use_uvloop=settings.uvloop))
