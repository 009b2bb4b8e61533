"""Every command's and subcommand's `--help` prints usage and exits 0; every option explains itself.

The parser is the real one from libs/local/cli/main.py, walked recursively, so a command added
tomorrow is covered without editing this file.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from echo_memory.libs.local.cli.main import COMMAND_MODULES, USAGE_ERROR, build_parser, main

REPO = Path(__file__).resolve().parents[2]


Walked = Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Walked:
    """(command words, parser) for the top-level parser and every subparser below it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from walk(child, (*path, name))


PATHS = [path for path, _ in walk(build_parser())]


def test_the_walk_reaches_nested_subcommands() -> None:
    assert ("token", "revoke") in PATHS and ("scope", "create") in PATHS and ("hooks", "install") in PATHS
    top = {path[0] for path in PATHS if path}
    assert top == {c for commands in COMMAND_MODULES.values() for c in commands}


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "echo-memory")
def test_help_prints_usage_and_exits_zero(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    # Through main(), so a command's help comes from the parser it really builds (its own module only).
    with pytest.raises(SystemExit) as exited:
        main([*path, "--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0
    assert out.startswith("usage: echo-memory"), out[:200]
    assert " ".join(("echo-memory", *path)) in out.splitlines()[0]


def test_every_option_and_argument_has_help_text() -> None:
    missing = [
        f"{' '.join(path) or 'echo-memory'} {'/'.join(action.option_strings) or action.dest}"
        for path, parser in walk(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction) and not action.help
    ]
    assert missing == []


def test_bare_echo_memory_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == USAGE_ERROR
    out = capsys.readouterr().out
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("    ") and line.split()}
    assert listed >= {c for commands in COMMAND_MODULES.values() for c in commands}


def test_the_installed_entry_point_prints_help_without_a_traceback() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "echo_memory.libs.local.cli", "--help"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "quickstart" in done.stdout and "calibrate" in done.stdout
