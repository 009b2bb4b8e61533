"""`hooks install|uninstall|show`, `hook` and `hook-store-turn`: live recall and capture in clients.

`hook recall|capture --client NAME` is what a client runs (dispatched in main.py before anything
heavy is imported; see libs/local/hookrun). `hook-store-turn FILE` is the detached child a capture hook
starts for clients that hand no transcript: it stores the turn as one episode.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from echo_memory.libs.core.config import Settings
from echo_memory.libs.server import eventloop

HOOK_CLIENTS = ("claude-code", "codex", "cursor", "gemini", "vscode")


def register(sub: Any) -> None:
    hooks = sub.add_parser("hooks", help="recall before each prompt and capture after each turn, in a client")
    verbs = hooks.add_subparsers(dest="hooks_command", required=True, metavar="install|uninstall|show")
    for name, helptext in (("install", "add the hooks (shows the diff first; idempotent)"),
                           ("uninstall", "remove exactly the hooks install added"),
                           ("show", "print the client's hook file and what install would change")):
        verb = verbs.add_parser(name, help=helptext)
        verb.add_argument("--for", dest="client", required=True, choices=HOOK_CLIENTS, help="the client")
        verb.add_argument("--project", metavar="PATH", help="the project's hook file (token from $ECHO_MEMORY_TOKEN)")
        if name != "show":
            verb.add_argument("--yes", action="store_true", help="write without asking")
        verb.set_defaults(func=hooks_cmd)
    hook = sub.add_parser("hook", help="run by a client: `hook recall|capture --client NAME` (reads its JSON on stdin)")
    hook.add_argument("action", choices=("recall", "capture"), help="recall before a prompt, capture after a turn")
    hook.add_argument("--client", required=True, choices=HOOK_CLIENTS, help="the client that runs the hook")
    store = sub.add_parser("hook-store-turn", help="store one captured turn as an episode (started by the hook)")
    store.add_argument("file", help="the turn file the capture hook wrote; removed once stored")
    store.set_defaults(func=store_turn_cmd)


def hooks_cmd(settings: Settings, args: argparse.Namespace) -> int:
    """install: hooks plus the hook's token; uninstall: exactly those; show: the file and the pending diff."""
    from echo_memory.libs.core.contracts.errors import EchoError
    from echo_memory.libs.local.cli.client_commands import (
        _apply_or_revoke,
        _confirm_and_apply,
        _connection,
        _err,
        _executable,
        _home,
        _hook_notes,
        _hook_url,
        _revoke_replaced,
        _revoke_unwritten,
        _Tokens,
    )
    from echo_memory.libs.local.clients import CLIENTS, ConfigError
    from echo_memory.libs.local.clients.files import mask_tokens, read_text
    from echo_memory.libs.local.clients.hooks import HOOKS, plan_hooks, plan_unhook
    from echo_memory.libs.local.clients.plan import PROJECT_COMMAND, plan_credentials
    from echo_memory.libs.local.connection import NotRunning

    client = CLIENTS[args.client]
    home = _home()
    project = Path(args.project).resolve() if args.project else None
    path = HOOKS[client.name].file(home, project)
    if args.hooks_command == "uninstall":
        try:
            change = plan_unhook(client.name, home, project)
            changes = [change] if change is not None else []
            if project is None:
                changes += [c for c in plan_credentials({client.name: None}, None) if c.before is not None]
            return _confirm_and_apply(changes, args.yes, project, mask_backups=True) or 0
        except ConfigError as exc:
            return _err(str(exc))
    executable = PROJECT_COMMAND if project is not None else _executable()
    if args.hooks_command == "show":
        try:
            planned = plan_hooks(client.name, home, project, executable)
        except ConfigError as exc:
            return _err(str(exc))
        text = read_text(path)
        print(f"# {path}" + ("" if text is not None else " (does not exist)"))
        if text is not None:
            sys.stdout.write(mask_tokens(text if text.endswith("\n") else text + "\n"))
        print("echo-memory: the hooks are installed and up to date" if not planned.changed
              else "echo-memory: `hooks install` would change:\n" + planned.diff())
        return 0
    tokens: _Tokens | None = None
    try:
        conn, remote = _connection(settings, project)
        changes = [plan_hooks(client.name, home, project, executable)]
        if project is None:
            tokens = _Tokens(settings, home, remote)
            token = tokens.for_client(client, None)
            changes += plan_credentials({client.name: (token, _hook_url(conn.for_client(client)))}, str(settings.home))
    except (ConfigError, EchoError, NotRunning) as exc:
        _revoke_unwritten(settings, tokens.issued if tokens else [])
        return _err(getattr(exc, "message", None) or str(exc))
    code = _apply_or_revoke(settings, changes, args.yes, tokens.issued if tokens else [], project)
    if code == 0:
        if tokens is not None:
            _revoke_replaced(settings, tokens.replaced)
        _hook_notes([client.name], False)
    return code


def store_turn_cmd(settings: Settings, args: argparse.Namespace) -> int:
    """Store the captured turn in FILE as one episode under the client's agent id; removes FILE.

    Returns 0 when stored, 1 (one sentence on stderr, which the hook sends to hooks.log) otherwise.
    """
    from echo_memory.libs.core.contracts.errors import EchoError

    path = Path(args.file)
    try:
        turn = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"echo-memory hook-store-turn: cannot read {path}: {exc}", file=sys.stderr)
        return 1
    try:
        result = eventloop.run(_store_turn(settings, turn), use_uvloop=settings.uvloop)
    except EchoError as exc:
        print(f"echo-memory hook-store-turn: {exc.message}", file=sys.stderr)
        return 1
    finally:
        path.unlink(missing_ok=True)  # a turn that cannot be stored now is not retried: the importer covers it
    print(f"echo-memory hook-store-turn: stored episode {result} for {turn.get('client')}")
    return 0


def episode_of(turn: dict[str, Any]) -> dict[str, Any]:
    """The import_episodes episode for a captured turn (its prompt, if known, and the reply)."""
    from echo_memory.libs.core.secrets import redact_secrets
    from echo_memory.libs.local.hookrun.recall import git_root

    lines = []
    if turn.get("prompt"):
        lines.append(f"user: {turn['prompt']}")
    lines.append(f"assistant: {turn['response']}")
    content = redact_secrets("\n".join(lines))  # import_episodes would refuse the whole turn otherwise
    cwd = turn.get("cwd")
    return {
        "kind": "turn", "content": content[:20_000], "speaker": turn.get("client"),
        "session_id": turn.get("session_id"), "occurred_at": turn.get("at"),
        "project": git_root(cwd) if isinstance(cwd, str) else None,
        "metadata": {"captured_by": "hook", "truncated": len(content) > 20_000},
    }


async def _store_turn(settings: Settings, turn: dict[str, Any]) -> str:
    from echo_memory.libs.core.contracts.bus import Caller
    from echo_memory.libs.core.contracts.identity import DEFAULT_GRANTS
    from echo_memory.libs.core.contracts.imports import ImportEpisodesInput
    from echo_memory.libs.core.contracts.parsing import parse_args
    from echo_memory.libs.core.contracts.verbs import IMPORT_EPISODES
    from echo_memory.libs.local.connection import bus_session, verb_timeout
    from echo_memory.libs.server.bus.client import BusClient

    client = str(turn.get("client") or "")
    if client not in HOOK_CLIENTS:
        raise ValueError(f"unknown client {client!r} in the turn file")
    # The CLI on the host acts for the client's agent id, as its own token would; provenance stays per client.
    caller = Caller(org=settings.org, agent_id=client, tool=client, read_scopes=list(DEFAULT_GRANTS),
                    write_scopes=list(DEFAULT_GRANTS))
    # The turn file is data another process wrote: refused as the service would refuse it.
    request = parse_args(ImportEpisodesInput, {"episodes": [episode_of(turn)]})
    async with bus_session(settings) as broker:
        answer = await BusClient(broker).call(
            IMPORT_EPISODES, request, caller=caller, timeout=verb_timeout(settings, IMPORT_EPISODES)
        )
    return answer.episode_ids[0]
