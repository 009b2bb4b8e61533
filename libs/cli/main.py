"""`echo-memory` entry point: parse the command, build settings once, dispatch."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from libs.config import Settings, load_settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="echo-memory", description="One shared memory for your AI agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start Postgres, NATS, every service and the MCP edge")
    up.add_argument("--detach", action="store_true", help="run in the background")
    quick = sub.add_parser("quickstart", help="up + schema + a token + the `claude mcp add` line")
    quick.add_argument("--detach", action="store_true", help="run in the background")
    sub.add_parser("down", help="stop the system started by `up`")
    sub.add_parser("status", help="each component: running or not, port, pid; schema; facts per scope")
    sub.add_parser("init-db", help="apply pending schema migrations (ECHO_MEMORY_DATABASE_URL or the embedded db)")
    mcp = sub.add_parser("mcp", help="serve MCP over stdio for clients that launch a command")
    mcp.add_argument("--token", help="agent token (default: ECHO_MEMORY_TOKEN)")
    service = sub.add_parser("service", help="run one service in the foreground (used by up and Kubernetes)")
    service.add_argument("name")
    token = sub.add_parser("token", help="manage agent tokens")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    create = token_sub.add_parser("create", help="issue a token for an agent (shown once)")
    create.add_argument("--agent", required=True)
    create.add_argument("--read", default="shared,solo", help="comma-separated scopes it may read")
    create.add_argument("--write", default="shared,solo", help="comma-separated scopes it may write")
    token_sub.add_parser("list", help="list tokens (prefixes only)")
    revoke = token_sub.add_parser("revoke", help="revoke a token by id, or every token of an agent")
    revoke.add_argument("--id", dest="token_id")
    revoke.add_argument("--agent")
    scope = sub.add_parser("scope", help="manage named scopes")
    scope_sub = scope.add_subparsers(dest="scope_command", required=True)
    scope_create = scope_sub.add_parser("create", help="create a named scope")
    scope_create.add_argument("name")
    scope_create.add_argument("--description", default="")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = load_settings()
    try:
        return _dispatch(args, settings)
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    from libs.cli import admin, system

    command = args.command
    if command in ("up", "quickstart"):
        return system.up(settings, detach=args.detach, quickstart=command == "quickstart")
    if command == "down":
        return system.down(settings)
    if command == "status":
        return system.status(settings)
    if command == "init-db":
        return admin.init_db(settings)
    if command == "service":
        from libs.bus.registry import NAMES, run

        if args.name not in NAMES:
            print(f"echo-memory: unknown service '{args.name}'; choose one of {', '.join(NAMES)}", file=sys.stderr)
            return 2
        return run(args.name, settings)
    if command == "mcp":
        return admin.mcp_stdio(settings, args.token)
    if command == "token":
        return admin.token(settings, args)
    if command == "scope":
        return admin.scope(settings, args)
    raise AssertionError(command)


__all__ = ["main"]
