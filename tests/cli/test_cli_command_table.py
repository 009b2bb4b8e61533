"""The CLI's command table names exactly what each module registers, and a command loads only its module."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

from echo_memory.libs.local.cli.main import COMMAND_MODULES, build_parser


def registered(module: str) -> set[str]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    importlib.import_module(module).register(sub)
    return set(sub.choices)


def test_the_table_lists_every_command_of_every_module_once() -> None:
    for module, commands in COMMAND_MODULES.items():
        assert registered(module) == set(commands), module
    every = [c for commands in COMMAND_MODULES.values() for c in commands]
    assert len(every) == len(set(every))


def commands_of(parser: argparse.ArgumentParser) -> set[str]:
    return set(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)


def test_a_known_command_builds_only_its_own_parser_and_anything_else_builds_all() -> None:
    assert commands_of(build_parser("import")) == {"import"}
    everything = {c for commands in COMMAND_MODULES.values() for c in commands}
    for word in (None, "--help", "imprt"):
        assert commands_of(build_parser(word)) == everything


def test_a_command_line_imports_no_other_command_module() -> None:
    probe = ("import sys; from echo_memory.libs.local.cli.main import build_parser; build_parser('docs'); "
             "print(sorted(m for m in sys.modules if m.startswith('echo_memory.libs.local.cli.') and m.endswith('_commands')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['echo_memory.libs.local.cli.docs_commands']"
