"""`echo-memory docs sync [PATH] [--project NAME]`: register a project's memory files.

Finds the files agents keep project memory in, reads them as UTF-8 and registers their content
with the writes service (`register_documents`), in batches small enough for one bus message.
Agents then see them through `pending_documents` and extract facts with `write_episode`.
Registering unchanged content is a no-op, so running it on every commit or session start is fine.
What `echo-memory install` wrote is never registered: a file it owns is skipped, and from an
instructions file (CLAUDE.md, AGENTS.md, GEMINI.md) only the user's text around our block is.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.documents import (
    MAX_DOCUMENT_BYTES,
    MAX_DOCUMENTS_PER_CALL,
    RegisterDocumentsInput,
    RegisteredDocument,
)
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.core.contracts.parsing import parse_args
from echo_memory.libs.core.contracts.verbs import REGISTER_DOCUMENTS
from echo_memory.libs.local.clients import ConfigError, user_text
from echo_memory.libs.local.connection import admin_call
from echo_memory.libs.server import eventloop

# Files found at any depth (below skipped directories), and paths relative to the root.
MEMORY_FILE_NAMES = frozenset({"CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "GEMINI.md"})
ROOT_FILES = (".cursorrules", ".windsurfrules", ".github/copilot-instructions.md", "NOTES.md", "notes.md")
RULE_TREES = (".cursor/rules", ".github/instructions")  # every file
NOTE_TREES = ("notes", ".notes")  # Markdown and text files only
NOTE_SUFFIXES = (".md", ".markdown", ".txt")
SKIPPED_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", ".venv", "venv", "env", "__pycache__", "dist", "build", "target",
    ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".next", ".cache", "vendor",
})
MAX_DEPTH = 6
# One register_documents request stays well under NATS's default 1 MiB payload even when JSON
# escapes every character.
BATCH_BYTES = 250_000


def register(sub: Any) -> None:
    docs = sub.add_parser("docs", help="project memory files (CLAUDE.md, AGENTS.md, rules, notes) for agents to ingest")
    docs_sub = docs.add_subparsers(dest="docs_command", required=True)
    sync = docs_sub.add_parser(
        "sync",
        help="register the project's memory files; unchanged files are skipped",
        description="Registers CLAUDE.md, CLAUDE.local.md, AGENTS.md, GEMINI.md (any depth), .cursorrules, "
        ".windsurfrules, .cursor/rules/**, .github/copilot-instructions.md, .github/instructions/**, "
        "NOTES.md, notes.md and notes/** under PATH (or PATH itself when it is a file).",
    )
    sync.add_argument("path", nargs="?", default=".", help="project directory or one file (default: .)")
    sync.add_argument("--project", help="project name (default: the directory's name)")
    sync.set_defaults(func=docs_sync)


def find_memory_files(root: Path) -> list[Path]:
    """The memory files under `root`, sorted; `root` itself when it is a file."""
    if root.is_file():
        return [root]
    found: set[Path] = set()
    for path in _walk(root, 0):
        if path.name in MEMORY_FILE_NAMES:
            found.add(path)
    for name in ROOT_FILES:
        candidate = root / name
        if candidate.is_file():
            found.add(candidate)
    for tree in RULE_TREES + NOTE_TREES:
        base = root / tree
        if base.is_dir():
            found.update(p for p in _walk(base, 0) if tree in RULE_TREES or p.suffix.lower() in NOTE_SUFFIXES)
    return sorted(found)


def _walk(directory: Path, depth: int) -> Iterator[Path]:
    if depth > MAX_DEPTH:
        return
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.is_symlink():
            continue  # never follow links out of the project
        if entry.is_dir():
            if entry.name not in SKIPPED_DIRS:
                yield from _walk(entry, depth + 1)
        elif entry.is_file():
            yield entry


def docs_sync(settings: Settings, args: argparse.Namespace) -> int:
    """Register the files; prints one line per file and a summary. Exit 1 when any file was not registered."""
    root = Path(args.path).expanduser().resolve()
    if not root.exists():
        print(f"echo-memory: {args.path} does not exist", file=sys.stderr)
        return 2
    base = root.parent if root.is_file() else root
    project = args.project or base.name
    documents, skipped = [], 0
    for path in find_memory_files(root):
        relative = path.relative_to(base).as_posix()
        try:
            content = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"skipped   {relative}: not readable as UTF-8 text ({type(exc).__name__})")
            skipped += 1
            continue
        try:
            own = user_text(content)
        except ConfigError as exc:
            print(f"skipped   {relative}: {exc}")
            skipped += 1
            continue
        if own is None:
            print(f"skipped   {relative}: written by `echo-memory install`, not project memory")
            continue
        content = own
        size = len(content.encode("utf-8"))
        if size > MAX_DOCUMENT_BYTES or "\x00" in content:
            print(f"skipped   {relative}: larger than {MAX_DOCUMENT_BYTES} bytes or binary")
            skipped += 1
            continue
        documents.append({"path": relative, "content": content})
    if not documents:
        print(f"no project memory files found under {root}" + (f" ({skipped} skipped)" if skipped else ""))
        return 1 if skipped else 0
    try:
        results = eventloop.run(_register(settings, project, documents), use_uvloop=settings.uvloop)
    except EchoError as exc:  # NotRunning and BusUnreachable among them
        print(f"echo-memory docs sync: {exc.message}", file=sys.stderr)
        return 1
    tally: dict[str, int] = {}
    for item in results:
        tally[item.status] = tally.get(item.status, 0) + 1
        print(f"{item.status:<9} {item.path}" + (f": {item.reason}" if item.reason else ""))
    summary = ", ".join(f"{tally.get(s, 0)} {s}" for s in ("new", "changed", "unchanged", "refused"))
    print(f"project '{project}': {summary}" + (f", {skipped} skipped" if skipped else ""))
    return 1 if tally.get("refused") or skipped else 0


async def _register(settings: Settings, project: str, documents: list[dict[str, str]]) -> list[RegisteredDocument]:
    results = []
    for batch in _batches(documents):
        # Files on disk, not a person's typed arguments: refused as the service would refuse them.
        request = parse_args(RegisterDocumentsInput, {"project": project, "documents": batch})
        results.extend((await admin_call(settings, REGISTER_DOCUMENTS, request)).documents)
    return results


def _batches(documents: list[dict[str, str]]) -> Iterator[list[dict[str, str]]]:
    batch: list[dict[str, str]] = []
    size = 0
    for doc in documents:
        weight = len(doc["content"].encode("utf-8")) + len(doc["path"])
        if batch and (size + weight > BATCH_BYTES or len(batch) >= MAX_DOCUMENTS_PER_CALL):
            yield batch
            batch, size = [], 0
        batch.append(doc)
        size += weight
    if batch:
        yield batch
