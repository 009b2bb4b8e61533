"""`echo-memory import`: every local agent's past conversations, one episode per complete turn.

    echo-memory import [--source S ...] [--since T] [--dry-run] [--file PATH] [--scope S] [--watch]

Reads Claude Code, Codex CLI, Cursor, Gemini CLI, OpenCode and VS Code Copilot chat histories
from their own files (libs/local/history/), redacts secrets, and stores each complete turn through the
writes service's `import_episodes` as the source client's agent, so provenance says which agent
had the conversation. A re-run imports only what is new; `--file` imports one transcript
incrementally (what the capture hook calls after each turn); `--watch` repeats the incremental
import every `--interval` seconds until interrupted. Formats and rules: docs/import.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.core.contracts.imports import ImportEpisodesInput, ImportEpisodesResult
from echo_memory.libs.local.history.base import Conversation, Source
from echo_memory.libs.local.history.engine import Importer, Send, SourceReport
from echo_memory.libs.local.history.sources import SOURCE_NAMES, build_source, source_of_file
from echo_memory.libs.local.history.state import ImportState, state_path
from echo_memory.libs.local.importers.sources import FROM_NAMES
from echo_memory.libs.server import eventloop

if TYPE_CHECKING:  # the bus client (FastStream) is loaded only once a command sends
    from echo_memory.libs.server.bus.client import BusClient

IMPORT_TOOL = "echo-memory import"


def register(sub: Any) -> None:
    imp = sub.add_parser("import", help="import local agents' conversation histories as searchable episodes")
    imp.add_argument("--source", action="append", choices=SOURCE_NAMES,
                     help="import only this client (repeatable; default: every client found)")
    imp.add_argument("--since", help="only turns that ended at or after this time (ISO 8601 date or time)")
    imp.add_argument("--dry-run", action="store_true", help="count what would be imported; store and write nothing")
    imp.add_argument("--file", help="import just this transcript, incrementally (needs or infers --source)")
    imp.add_argument("--scope", help="scope to import into (default: shared)")
    imp.add_argument("--watch", action="store_true", help="keep importing new turns until interrupted")
    imp.add_argument("--interval", type=float, default=30.0, help="seconds between --watch runs (default 30)")
    imp.add_argument("--json", action="store_true", help="print the per-source report as JSON")
    imp.add_argument("--quiet", action="store_true", help="no progress and no summary on stderr")
    imp.add_argument("--from", dest="from_source", choices=FROM_NAMES,
                     help="import another memory system's store at PATH instead of chat histories")
    imp.add_argument("path", nargs="?", help="with --from: the source's file or folder")
    imp.add_argument("--agent", help="with --from: the agent the imported memories are written as (default: the source)")
    imp.set_defaults(func=run_import)


def _since(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise SystemExit(f"echo-memory import: --since {text!r} is not an ISO 8601 date or time") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _file_source(args: Any) -> tuple[Source, Conversation]:
    path = Path(args.file).expanduser()
    names = args.source or []
    name = names[0] if len(names) == 1 else source_of_file(path.resolve())
    if len(names) > 1 or name is None:
        raise SystemExit("echo-memory import: --file needs one --source (it cannot be told from the path)")
    if not path.is_file():
        raise SystemExit(f"echo-memory import: {path} is not a file")
    source = build_source(name, Path.home(), os.environ)
    make = getattr(source, "file", None)
    if make is None:
        raise SystemExit(f"echo-memory import: --source {name} keeps its history in a database, not in files")
    return source, make(path.resolve())


def run_import(settings: Settings, args: Any) -> int:
    """Exit 0 after a run (or an interrupted --watch), 1 when the system cannot be reached or refuses a batch."""
    if args.from_source or args.path or args.agent:
        if not (args.from_source and args.path):
            raise SystemExit("echo-memory import: --from SOURCE and PATH go together (--agent only with them)")
        if args.source or args.file or args.watch or args.since:
            raise SystemExit("echo-memory import: --from reads another memory system; --source, --file, --watch "
                             "and --since are for agent histories")
        from echo_memory.libs.local.cli.import_commands import run_from

        return run_from(settings, args)
    since = _since(args.since)
    progress = None if args.quiet else sys.stderr
    try:
        return int(eventloop.run(_main(settings, args, since, progress), use_uvloop=settings.uvloop))
    except EchoError as exc:
        print(f"echo-memory import: {exc.code}: {exc.message}", file=sys.stderr)
        return 1


async def _main(settings: Settings, args: Any, since: float | None, progress: Any) -> int:
    one = _file_source(args) if args.file else None
    sources = [one[0]] if one else [build_source(n, Path.home(), os.environ) for n in (args.source or SOURCE_NAMES)]
    state = ImportState(state_path(settings.home), readonly=args.dry_run)
    try:
        if args.dry_run:
            reports = await _once(Importer(sources, state, None, since=since, progress=progress), one)
            _report(reports, args, dry=True)
            return 0
        from echo_memory.libs.local.connection import bus_session
        from echo_memory.libs.server.bus.client import BusClient

        async with bus_session(settings) as broker:
            send = _sender(BusClient(broker), settings, args.scope)
            importer = Importer(sources, state, send, since=since, progress=progress)
            while True:
                reports = await _once(importer, one)
                _report(reports, args, dry=False)
                if not args.watch:
                    return 0
                await asyncio.sleep(args.interval)
    finally:
        state.close()


async def _once(importer: Importer, one: tuple[Source, Conversation] | None) -> list[SourceReport]:
    if one is not None:
        return [await importer.run_source(one[0], only=[one[1]])]
    return await importer.run()


def _sender(client: BusClient, settings: Settings, scope: str | None) -> Send:
    from echo_memory.libs.core.contracts.bus import Caller
    from echo_memory.libs.core.contracts.parsing import parse_args
    from echo_memory.libs.core.contracts.verbs import IMPORT_EPISODES

    async def send(source: str, episodes: list[dict[str, Any]]) -> ImportEpisodesResult:
        # The turns were had by the source client, not by whoever runs the import: that agent
        # is the provenance (the CLI on the host is trusted like the admin identity it also uses).
        caller = Caller(org=settings.org, agent_id=source, read_scopes=[], write_scopes=[scope or "shared"],
                        tool=IMPORT_TOOL)
        # Parsed as the service parses it: a turn it would refuse is the same InvalidArgument here.
        request = parse_args(ImportEpisodesInput, {"episodes": episodes, **({"scope": scope} if scope else {})})
        return await client.call(IMPORT_EPISODES, request, caller=caller, timeout=settings.timeouts.bulk)

    return send


def _report(reports: list[SourceReport], args: Any, *, dry: bool) -> None:
    if args.json:
        print(json.dumps([r.__dict__ for r in reports], indent=2))
    if args.quiet:
        return
    for r in reports:
        if not (r.conversations or r.unchanged):
            continue
        stored = f"{r.turns} new turns would be imported" if dry else f"{r.imported} turns imported"
        extra = [f"{r.already} already stored" if r.already else "", f"{r.waiting} waiting for their reply"
                 if r.waiting else "", f"{r.before_since} before --since" if r.before_since else "",
                 f"{r.refused} refused" if r.refused else "", f"{r.clipped_turns} shortened" if r.clipped_turns else "",
                 f"{r.unreadable_lines} unreadable lines" if r.unreadable_lines else ""]
        extra += [f"{n} {why}" for why, n in r.skipped.items()]
        print(f"{r.source}: {stored} from {r.conversations} conversations ({r.unchanged} unchanged); "
              f"{r.secrets_redacted} secrets redacted in {r.turns_with_secrets} turns"
              + "".join(f"; {e}" for e in extra if e), file=sys.stderr)
