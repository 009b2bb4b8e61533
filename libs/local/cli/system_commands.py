"""Commands for the embedded system's lifecycle: up, quickstart, down, status, line, service."""

from __future__ import annotations

import argparse
import sys
from types import ModuleType
from typing import Any

from echo_memory.libs.core.config import Settings


def register(sub: Any) -> None:
    up = sub.add_parser("up", help="start Postgres, NATS, every service and the MCP edge (foreground)")
    up.add_argument("--detach", action="store_true", help="run in the background")
    # The child `--detach` starts: it logs to a file, so the parent prints the client line.
    up.add_argument("--background", action="store_true", help=argparse.SUPPRESS)
    up.set_defaults(func=lambda s, a: _up(s, a, quickstart=False))
    quick = sub.add_parser("quickstart", help="up + schema + a token kept across starts + the user-scoped `claude mcp add` line")
    quick.add_argument("--detach", action="store_true", help="run in the background")
    quick.set_defaults(func=lambda s, a: _up(s, a, quickstart=True))
    down = sub.add_parser("down", help="stop the system started by `up`")
    down.set_defaults(func=lambda s, a: _system().down(s))
    status = sub.add_parser("status", help="each component: running or not, port, pid; schema; per scope its facts and writers")
    status.set_defaults(func=lambda s, a: _system().status(s))
    line = sub.add_parser("line", help="print the current client line (`claude mcp add ...`) of the running system")
    line.set_defaults(func=lambda s, a: _system().line(s))
    service = sub.add_parser("service", help="run services in the foreground, in one process (used by up and Kubernetes)")
    service.add_argument("names", nargs="+", metavar="name",
                         help="edge, or one or more of writes, retrieval, causal, audit, reindex, consolidation")
    service.set_defaults(func=_service)


def _system() -> ModuleType:
    from echo_memory.libs.local.cli import system  # imported late: it pulls in the supervisor

    return system


def _up(settings: Settings, args: argparse.Namespace, *, quickstart: bool) -> int:
    background = bool(getattr(args, "background", False))  # only `up` has the flag
    return int(_system().up(settings, detach=args.detach, quickstart=quickstart, background=background))


def _service(settings: Settings, args: argparse.Namespace) -> int:
    from echo_memory.libs.server.service.registry import NAMES, run

    unknown = [n for n in args.names if n not in NAMES]
    if unknown:
        print(f"echo-memory: unknown service '{unknown[0]}'; choose one of {', '.join(NAMES)}", file=sys.stderr)
        return 2
    try:
        return run(args.names, settings)
    except ValueError as exc:
        print(f"echo-memory: {exc}", file=sys.stderr)
        return 2
