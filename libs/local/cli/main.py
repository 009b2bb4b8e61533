"""`echo-memory` entry point: parse the command, build settings once, dispatch.

Each command group lives in its own module with `register(subparsers)`, which sets
`func(settings, args) -> int` on its parsers; add a module and its commands to COMMAND_MODULES.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

# Each module and the commands its register() adds (tests/cli/test_cli_command_table.py checks the
# table against the modules). A command line imports only its own module: building every parser
# imports every command's dependencies, seconds of start-up for a one-line command.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "echo_memory.libs.local.cli.system_commands": ("down", "line", "quickstart", "service", "status", "up"),
    "echo_memory.libs.local.cli.admin_commands": ("init-db", "mcp", "scope", "token"),
    "echo_memory.libs.local.cli.retrieval_commands": ("benchmark", "eval", "eval-external", "recall", "reindex"),
    "echo_memory.libs.local.cli.audit_commands": ("export", "restore", "why"),
    "echo_memory.libs.local.cli.health_commands": ("health",),
    "echo_memory.libs.local.cli.client_commands": ("adopt", "bridge", "connect", "install", "uninstall"),
    "echo_memory.libs.local.cli.hook_commands": ("hook", "hook-store-turn", "hooks"),
    "echo_memory.libs.local.cli.docs_commands": ("docs",),
    "echo_memory.libs.local.cli.calibrate_commands": ("calibrate",),
    "echo_memory.libs.local.cli.history_commands": ("import",),
    "echo_memory.libs.local.cli.dashboard_commands": ("dashboard", "demo-seed"),
    "echo_memory.libs.local.cli.model_commands": ("distil", "infer-causal-hints", "judge-external"),
    "echo_memory.libs.local.cli.consolidate_commands": ("benchmark-tiers", "benchmark-keepup", "brief", "consolidate"),
    "echo_memory.libs.local.cli.forget_commands": ("forget",),
    "echo_memory.libs.local.cli.entity_commands": ("entities",),
}

USAGE_ERROR = 2
INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
PIPE_CLOSED = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of `command` alone when it is a known command, else of every command (help, typos)."""
    import argparse  # here, not at the top: `echo-memory hook` never parses with it

    parser = argparse.ArgumentParser(prog="echo-memory", description="One shared memory for your AI agents.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    owners = [m for m, commands in COMMAND_MODULES.items() if command in commands] or list(COMMAND_MODULES)
    for name in owners:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code, 2 for a usage error, 130 after Ctrl-C, 141 when stdout's reader left.

    Expected conditions (the system is down, a typed EchoError, a refused connection) end in one
    sentence on stderr and exit code 1. Anything else is a bug and keeps its traceback on purpose:
    hiding it would make bugs look like conditions.
    """
    words = list(sys.argv[1:] if argv is None else argv)
    if not words:
        # argparse would only say COMMAND is required; a newcomer needs the list of commands.
        build_parser().print_help()
        return USAGE_ERROR
    if words[:1] == ["hook"] and not {"-h", "--help"} & set(words):
        # A client runs this before every prompt: only the tiny hook runtime is imported.
        # A person asking for help gets argparse's, like every other command.
        from echo_memory.libs.local.hookrun import main as hook_main

        return hook_main(words[1:])
    from pydantic import ValidationError

    from echo_memory.libs.core.config import load_settings, settings_problems
    from echo_memory.libs.core.contracts.errors import EchoError
    from echo_memory.libs.core.contracts.parsing import invalid_argument

    args = build_parser(words[0] if words else None).parse_args(words)
    prefix = f"echo-memory {args.command}"
    try:
        settings = load_settings()
    except ValidationError as exc:
        print(f"{prefix}: the settings are invalid ({settings_problems(exc)}); check the ECHO_MEMORY_* variables",
              file=sys.stderr)
        return USAGE_ERROR
    try:
        code = int(args.func(settings, args))
        sys.stdout.flush()  # inside the guard: a reader that left shows up here, not at interpreter exit
        return code
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:
        # Python would try to flush stdout again at exit and print "Exception ignored"; point it
        # at /dev/null so `echo-memory status | head -1` ends quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return PIPE_CLOSED
    except EchoError as exc:  # NotRunning and BusUnreachable among them
        print(f"{prefix}: {exc.message}", file=sys.stderr)
        return 1
    except ValidationError as exc:
        # A command's arguments built into a verb's model here rather than at the service: the
        # same refusal the service would give them.
        refused = invalid_argument(exc)
        print(f"{prefix}: {refused.code}: {refused.message}", file=sys.stderr)
        return 1
    except ConnectionError as exc:
        print(f"{prefix}: a connection failed ({exc.strerror or exc}); is Echo Memory running? "
              "start it with `echo-memory up`", file=sys.stderr)
        return 1
