"""`echo-memory import --from mcp-memory|mem0|basic-memory PATH`: move in from another memory system.

    echo-memory import --from SOURCE PATH [--scope S] [--agent A] [--dry-run] [--json] [--quiet]

Reads the source's files (libs/local/importers/), maps each record onto entities and facts and
writes them through the writes service's `write_episode` as agent A (default: the source's
name), so every record goes through entity resolution, supersession, the secret filter and the
audit log, with `echo-memory import --from SOURCE` as the tool. Formats and mappings: docs/import.md.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.errors import EchoError, InvalidArgument
from echo_memory.libs.core.contracts.identity import is_reserved_agent
from echo_memory.libs.core.contracts.verbs import In, Out, Verb
from echo_memory.libs.local.importers.engine import Importer, Report, Send
from echo_memory.libs.local.importers.sources import FROM_SOURCES, plain_path
from echo_memory.libs.local.importers.state import FromState, from_state_path
from echo_memory.libs.server import eventloop

if TYPE_CHECKING:  # the bus client (FastStream) is loaded only once a command sends
    from echo_memory.libs.server.bus.client import BusClient

SHOWN_REASONS = 20


def tool_of(source: str) -> str:
    return f"echo-memory import --from {source}"


def run_from(settings: Settings, args: Any) -> int:
    """Exit 0 when every record was stored or reported, 1 when the system cannot be reached or fails,
    2 for a path or agent that cannot be read or used (nothing is sent then)."""
    try:
        report = eventloop.run(import_from(settings, args.from_source, args.path, scope=args.scope,
                                           agent=args.agent, dry_run=args.dry_run,
                                           progress=None if args.quiet else sys.stderr),
                               use_uvloop=settings.uvloop)
    except InvalidArgument as exc:
        print(f"echo-memory import: refused, nothing was sent: {exc.message}", file=sys.stderr)
        return 2
    except EchoError as exc:
        print(f"echo-memory import: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    if not args.quiet:
        print(summary(report), file=sys.stderr)
    return 0


async def import_from(settings: Settings, source: str, path_text: str, *, scope: str | None = None,
                      agent: str | None = None, dry_run: bool = False, progress: Any = None,
                      send: Send | None = None) -> Report:
    """Import one source's PATH; the report counts every record by outcome and gives each one not stored a reason.

    Raises InvalidArgument (nothing sent) for an unknown source, a path that is missing, climbs
    with `..` or is of the wrong kind, or a reserved agent; NotRunning / BusUnreachable when the
    system is down; an EchoError the store raises past its retries (what was acknowledged stays,
    and the next run resumes after it). `send` replaces the bus (tests of the engine only).
    """
    reader = FROM_SOURCES.get(source)
    if reader is None:
        raise InvalidArgument(f"--from {source!r}: expected one of {', '.join(FROM_SOURCES)}")
    path = reader.check(plain_path(path_text))
    writer = agent or source
    if is_reserved_agent(writer):
        raise InvalidArgument(f"--agent {writer!r} is reserved; name the agent that kept these memories")
    state = FromState(from_state_path(settings.home), readonly=dry_run)
    try:
        if dry_run:
            importer = Importer(source, state, None, scope=scope, agent=writer, progress=progress)
            report = await importer.run(reader.read(path))
        elif send is not None:
            report = await Importer(source, state, send, scope=scope, agent=writer, progress=progress).run(
                reader.read(path))
        else:
            from echo_memory.libs.local.connection import bus_session
            from echo_memory.libs.server.bus.client import BusClient

            async with bus_session(settings) as broker:
                bus_send = sender(BusClient(broker), settings, source, scope)
                importer = Importer(source, state, bus_send, scope=scope, agent=writer, progress=progress)
                report = await importer.run(reader.read(path))
    finally:
        state.close()
    report.unmapped = list(reader.unmapped)
    return report


def sender(client: BusClient, settings: Settings, source: str, scope: str | None) -> Send:
    """write_episode (end_facts for a deletion) as the agent that kept the memories, the import named as the tool."""
    from echo_memory.libs.core.contracts.bus import Caller

    async def send(agent: str, verb: Verb[In, Out], args: In) -> Out:
        # The CLI on the host is trusted like the admin identity it also uses: the records were
        # written by the source's agent, and that is the provenance the store keeps.
        caller = Caller(org=settings.org, agent_id=agent, read_scopes=[scope or "shared"],
                        write_scopes=[scope or "shared"], tool=tool_of(source))
        return await client.call(verb, args, caller=caller, timeout=settings.timeouts.write)

    return send


def summary(r: Report) -> str:
    """The report for a person: counts per outcome, the first reasons, what the mapping leaves out."""
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(r.kinds.items()))
    lines = [f"{r.source}: {r.records} records ({kinds or 'none'})"]
    if r.dry_run:
        decided = ", ".join(f"{n} {o}" for o, n in r.outcomes.items() if n)
        lines.append(f"  dry run: {r.would_write} would be written{'; ' + decided if decided else ''}; nothing sent")
    else:
        lines.append("  " + ", ".join(f"{n} {o}" for o, n in r.outcomes.items())
                     + (f" ({r.earlier_run} of them by an earlier run)" if r.earlier_run else ""))
    for item in r.reasons[:SHOWN_REASONS]:
        lines.append(f"  {item['outcome']}: {item['where']}: {item['reason']}")
    if len(r.reasons) > SHOWN_REASONS:
        lines.append(f"  … {len(r.reasons) - SHOWN_REASONS} more (--json lists every one)")
    lines += [f"  not carried: {u}" for u in r.unmapped]
    return "\n".join(lines)
