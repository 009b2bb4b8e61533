"""The docs a newcomer follows in the first hour say what the code does.

- every `echo-memory …` command in the upgrade, autostart and uninstall sections parses;
- the systemd unit and the launchd plist are well-formed and start `echo-memory up`;
- no document points at a path outside the repository;
- every count of "the N tools" matches the tools the edge registers;
- the README's test paragraph names everything `make test` depends on.
"""

from __future__ import annotations

import configparser
import plistlib
import re
from pathlib import Path

import pytest

from echo_memory.libs.local.cli.main import build_parser
from echo_memory.services.edge.tools import TOOLS

REPO = Path(__file__).resolve().parents[2]
OPERATIONS = (REPO / "docs" / "operations.md").read_text()
DOCS = sorted([*(REPO / "docs").rglob("*.md"), REPO / "README.md"])
PLACEHOLDERS = {"<scope>": "shared", "<client>": "claude-code", "PATH": "some/project"}
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen")
NUMBERS = {word: value for value, word in enumerate(WORDS)}


def section(title: str) -> str:
    start = OPERATIONS.index(f"\n## {title}\n")
    end = OPERATIONS.find("\n## ", start + 1)
    return OPERATIONS[start:end if end > 0 else None]


def fenced(text: str, language: str) -> str:
    match = re.search(rf"```{language}\n(.*?)```", text, re.DOTALL)
    assert match, f"no {language} block"
    return match.group(1)


@pytest.mark.parametrize("title", ["Upgrading on a laptop", "Starting at login (autostart)", "Uninstalling everything"])
def test_every_command_in_the_section_parses(title: str) -> None:
    commands = [m.group(1).strip() for m in re.finditer(r"`echo-memory ([^`]+)`", section(title))]
    assert commands, title
    parser = build_parser()
    for command in commands:
        words = [PLACEHOLDERS.get(word, word) for word in command.split()]
        try:
            parser.parse_args(words)
        except SystemExit:
            pytest.fail(f"{title}: `echo-memory {command}` is not a command the CLI accepts")


def test_the_systemd_unit_runs_up_in_the_foreground_and_stops_it_gently() -> None:
    unit = configparser.ConfigParser(interpolation=None)
    unit.read_string(fenced(section("Starting at login (autostart)"), "ini"))
    service = unit["Service"]
    assert service["ExecStart"].split()[1:] == ["up"]
    assert service["KillMode"] == "mixed"  # SIGTERM to the supervisor only; it stops its children in order
    assert int(service["TimeoutStopSec"]) >= 60
    assert unit["Install"]["WantedBy"] == "default.target"
    build_parser().parse_args(service["ExecStart"].split()[1:])


def test_the_launchd_plist_is_valid_and_runs_up() -> None:
    plist = plistlib.loads(fenced(section("Starting at login (autostart)"), "xml").encode())
    assert plist["Label"] == "dev.echo-memory" and plist["RunAtLoad"] is True
    assert plist["ProgramArguments"][1:] == ["up"]
    build_parser().parse_args(plist["ProgramArguments"][1:])


def test_no_document_points_outside_the_repository() -> None:
    # Brackets keep this file from naming those folders itself; the pattern is the same.
    outside = re.compile(r"\.\./shared|/wor[k]/|/roo[t]/|/home/[a-z]")
    found = [f"{doc.relative_to(REPO)}:{n}" for doc in DOCS
             for n, line in enumerate(doc.read_text().splitlines(), 1) if outside.search(line)]
    assert found == []


def test_every_tool_count_matches_the_edge() -> None:
    count = re.compile(rf"\b(?:the|our|all|own|whose) (\d+|{'|'.join(NUMBERS)}) (?:MCP )?tools\b", re.IGNORECASE)
    sources = [*DOCS, *sorted((REPO / "services" / "edge").glob("*.py"))]
    wrong = [f"{path.relative_to(REPO)}: {m.group(0)}" for path in sources for m in count.finditer(path.read_text())
             if int(NUMBERS.get(m.group(1).lower(), m.group(1))) != len(TOOLS)]
    assert wrong == [], f"the edge registers {len(TOOLS)} tools"


# What each prerequisite of `make test` is called in the README's test paragraph.
NAMED_BY = {"lint": "mypy", "browser-deps": "chromium", "images": "make images", "k8s-real-bin": "Kubernetes API server"}


def test_the_readme_names_everything_make_test_needs() -> None:
    makefile = (REPO / "Makefile").read_text()
    prerequisites = re.search(r"^test: (.*)$", makefile, re.MULTILINE)
    assert prerequisites
    readme = (REPO / "README.md").read_text()
    paragraph = next(p for p in readme.split("\n\n") if p.startswith("`make test`"))
    for target in prerequisites.group(1).split():
        assert target in NAMED_BY, f"`make test` now also needs `{target}`: name it in the README's test paragraph"
        assert NAMED_BY[target] in paragraph, target
    for need in ("podman", "apt-get", "Debian 12", "sudo", "Python 3.11"):
        assert need in paragraph, need
