"""`echo-memory` entry point: parse the command, build settings once, dispatch.

Each command group lives in its own module with `register(subparsers)`, which sets
`func(settings, args) -> int` on its parsers; add a module to COMMAND_MODULES to add commands.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from libs.config import load_settings

COMMAND_MODULES: tuple[str, ...] = (
    "libs.cli.system_commands",
    "libs.cli.admin_commands",
    "libs.cli.retrieval_commands",
    "libs.cli.audit_commands",
    "libs.cli.client_commands",
    "libs.cli.docs_commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="echo-memory", description="One shared memory for your AI agents.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = load_settings()
    try:
        return int(args.func(settings, args))
    except KeyboardInterrupt:
        return 130
