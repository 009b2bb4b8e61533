"""`echo-memory why FACT_ID`, `echo-memory export`, `echo-memory restore FILE` — over the bus, as the org admin.

export streams byte-bounded pages from the audit service into JSON Lines (header, records, end
line); `--resume` continues a file an interruption cut short. restore reads and checks the whole
file here first — a foreign, malformed or truncated file is refused before anything is sent — then
stages it in byte-bounded chunks and asks the audit service to restore it in one transaction. The
paging itself lives in libs/local/backup.py; progress goes to stderr when it is a terminal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.audit import ExportFileError, WhyInput, WhyResult
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.core.contracts.framing import frame_text
from echo_memory.libs.local.backup import (
    PARTIAL_SUFFIX,
    Call,
    export_to,
    import_lines,
    read_export_file,
    read_partial_export,
    resume_paths,
)
from echo_memory.libs.local.cli.output import print_json
from echo_memory.libs.local.private_files import open_private_text
from echo_memory.libs.server import eventloop

__all__ = ["admin_session", "export_to", "import_lines", "read_export_file", "register"]


def register(sub: Any) -> None:
    why_p = sub.add_parser("why", help="the full trail of one fact: versions, entities, reads, saves, audit rows")
    why_p.add_argument("fact_id", help="the fact's id (a recall result shows it)")
    why_p.add_argument("--json", action="store_true", help="print the raw result as JSON")
    why_p.set_defaults(func=lambda s, a: _run(s, "why", _why(s, a.fact_id, a.json)))

    export = sub.add_parser("export", help="everything (or one scope) as versioned JSON Lines")
    export.add_argument("--scope", help="one scope by its stored name (solo scopes: solo:<agent>)")
    export.add_argument("--out", help="file to write (default: standard output)")
    export.add_argument("--resume", metavar="FILE",
                        help="continue an interrupted export of FILE (its --out path or its .partial file)")
    export.add_argument("--progress", action="store_true", help="report progress on stderr even when it is not a terminal")
    export.add_argument("--format", choices=("echo-memory", "mcp-memory"), default="echo-memory",
                        help="mcp-memory: the current graph as the MCP reference memory server's JSON Lines")
    export.set_defaults(func=lambda s, a: _run(s, "export", _export_as(s, a)))

    restore = sub.add_parser("restore", help="restore an export into an empty org or scope")
    restore.add_argument("file", help="a file written by `echo-memory export`")
    restore.add_argument("--scope", help="restore the file's only scope under this name")
    restore.add_argument("--progress", action="store_true",
                         help="report progress on stderr even when it is not a terminal")
    restore.set_defaults(func=lambda s, a: _run(s, "restore", _restore(s, a.file, a.scope, a.progress)))


def _run(settings: Settings, command: str, work: Awaitable[int]) -> int:
    try:
        return eventloop.run(work, use_uvloop=settings.uvloop)  # type: ignore[arg-type]
    except EchoError as exc:  # NotRunning and BusUnreachable among them
        print(f"echo-memory {command}: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        raise  # the reader of standard output left; main() ends quietly
    except (ExportFileError, OSError) as exc:
        print(f"echo-memory {command}: refused, nothing was written: {exc}", file=sys.stderr)
        return 2


@asynccontextmanager
async def admin_session(settings: Settings) -> AsyncIterator[Call]:
    """One bounded bus connection for a whole command, calling as the org's admin identity.

    By name: export and restore (libs/local/backup.py) carry the records exactly as the service
    wrote them, which a result model would parse and serialise again; the test tiers answer the
    same call shape. A command's single typed request is `admin_call` (libs/local/connection.py).

    Raises NotRunning or BusUnreachable (libs/local/connection.py) when the bus cannot be reached.
    """
    from echo_memory.libs.core.contracts.identity import admin_caller
    from echo_memory.libs.local.connection import bus_session
    from echo_memory.libs.server.bus.client import BusClient

    async with bus_session(settings) as broker:
        client = BusClient(broker)
        caller = admin_caller(settings.org)

        async def call(service: str, verb: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
            return await client.call_by_name(caller=caller, service=service, verb=verb, args=args, timeout=timeout)

        yield call


# ---- export / restore --------------------------------------------------------------------------


def progress_stream(asked: bool) -> TextIO | None:
    """stderr when it is a terminal or `--progress` was given; otherwise no progress at all."""
    return sys.stderr if asked or sys.stderr.isatty() else None


async def _export_as(settings: Settings, args: Any) -> int:
    if args.format == "mcp-memory":
        if args.resume is not None:
            raise ExportFileError("--resume continues an echo-memory export; an mcp-memory export is written whole")
        return await _export_mcp(settings, args.scope, args.out)
    return await _export(settings, args.scope, args.out, args.resume, args.progress)


async def _export_mcp(settings: Settings, scope: str | None, out: str | None) -> int:
    """The current graph in the reference memory server's format; the summary (stderr) lists what it cannot hold."""
    from echo_memory.libs.local.importers.export_mcp import export_mcp_memory

    options: dict[str, Any] = {"scope": scope, "timeout": settings.timeouts.bulk, "page_bytes": settings.backup_page_bytes}
    async with admin_session(settings) as call:
        if out is None:
            summary = await export_mcp_memory(call, sys.stdout, **options)
        else:
            path = Path(out)
            partial = path.with_name(path.name + PARTIAL_SUFFIX)
            with partial.open("w", encoding="utf-8") as handle:
                summary = await export_mcp_memory(call, handle, **options)
            partial.replace(path)  # a failed export never leaves a file that looks complete
    print(json.dumps({"format": "mcp-memory", **summary}), file=sys.stderr)
    return 0


async def _export(settings: Settings, scope: str | None, out: str | None, resume: str | None, progress: bool) -> int:
    shown = progress_stream(progress)
    options: dict[str, Any] = {"progress": shown, "timeout": settings.timeouts.bulk,
                               "page_bytes": settings.backup_page_bytes}
    if resume is not None:
        if out is not None:
            raise ExportFileError("--resume FILE continues FILE; do not pass --out with it")
        partial, path = resume_paths(resume)
        state = read_partial_export(partial)
        if state.header["org"] != settings.org:
            raise ExportFileError(f"{partial} is an export of org '{state.header['org']}', not '{settings.org}'")
        if scope is not None and scope != state.header["scope"]:
            raise ExportFileError(f"{partial} is an export of scope {state.header['scope']!r}, not {scope!r}")
        with partial.open("r+b") as handle:
            handle.truncate(state.complete_bytes)  # drop a line the interruption cut
        async with admin_session(settings) as call:
            with open_private_text(partial, "a") as handle:
                await export_to(call, handle, scope=state.header["scope"], resume=state, **options)
    elif out is None:
        async with admin_session(settings) as call:
            await export_to(call, sys.stdout, scope=scope, **options)
        return 0
    else:
        path = Path(out)
        partial = path.with_name(path.name + PARTIAL_SUFFIX)
        async with admin_session(settings) as call:
            with open_private_text(partial, "w") as handle:
                await export_to(call, handle, scope=scope, **options)
    if partial != path:
        partial.replace(path)  # a failed export never leaves a file that looks complete
    print(f"wrote {path}", file=sys.stderr)
    return 0


async def _restore(settings: Settings, file: str, scope: str | None, progress: bool) -> int:
    lines = read_export_file(file)
    async with admin_session(settings) as call:
        result = await import_lines(call, lines, scope=scope, progress=progress_stream(progress),
                                    timeout=settings.timeouts.bulk, chunk_bytes=settings.backup_page_bytes)
    print_json(result)
    kept = "kept" if result.ids_kept else f"remapped ({len(result.id_map)} ids, see id_map)"
    print(f"restored scopes {', '.join(result.scopes)}; ids {kept}; run `echo-memory reindex` to rebuild BM25 "
          "statistics", file=sys.stderr)
    if result.erased_skipped or result.erased_redacted:
        print(f"the erasure log (echo-memory forget --log) kept {result.erased_skipped} erased records out and "
              f"restored {result.erased_redacted} without their erased text", file=sys.stderr)
    return 0


# ---- why ---------------------------------------------------------------------------------------


async def _why(settings: Settings, fact_id: str, as_json: bool) -> int:
    from echo_memory.libs.core.contracts.verbs import WHY
    from echo_memory.libs.local.connection import admin_call

    result = await admin_call(settings, WHY, WhyInput(fact_id=fact_id))
    print(result.model_dump_json(indent=2) if as_json else render_why(result))
    return 0


def render_why(r: WhyResult) -> str:
    """The trail as text for a person, newest knowledge last, inside the recall block: it quotes stored text."""
    p = r.written_by
    asked = next(v for v in r.versions if v.is_asked)
    out = [
        f"fact {r.fact_id} (scope {r.scope})",
        f"  {asked.source} —{asked.relation}→ {asked.target}: {asked.text}",
        f"  written by {p.agent_id} via {p.tool or 'unknown tool'}, project {p.project or '-'}, "
        f"session {p.session_id or '-'}, at {p.written_at.isoformat()}",
        f"  valid from {_t(p.valid_from)} until {_t(p.valid_until) if p.valid_until else 'now'}",
        f"versions ({len(r.versions)}, oldest first):",
    ]
    for i, v in enumerate(r.versions, 1):
        mark = "  <- this fact" if v.is_asked else ""
        hint = f" [{v.causal_hint}]" if v.causal_hint else ""
        out.append(f"  {i}. {v.fact_id} {v.provenance.agent_id} {_t(v.provenance.valid_from)}"
                   f"..{_t(v.provenance.valid_until) if v.provenance.valid_until else 'now'}{hint}: {v.text}{mark}")
    out.append("entities:")
    for e in r.entities:
        aliases = f"; aliases {', '.join(e.aliases)}" if e.aliases else ""
        out.append(f"  {e.role}: {e.name} ({e.type}), created by {e.created_by} at {_t(e.created_at)}{aliases}")
        for a in e.resolutions:
            how = (a.after or {}).get("how")
            out.append(f"    {a.kind}{f' ({how})' if how else ''} by {a.agent_id} at {_t(a.created_at)}: {a.reason}")
        if e.merged_into:
            out.append(f"    answers now as entity {e.merged_into} (merged; `echo-memory entities unmerge` undoes it)")
        out += [f"    {a.kind} by {a.agent_id} at {_t(a.created_at)}: {a.reason}" for a in e.identity]
    out.append(f"reads that returned it ({len(r.reads)}):")
    out += [f"  {_t(x.created_at)} {x.agent_id} rank {x.rank} score {x.score:.3f} query {x.query!r} (read {x.read_id})"
            for x in r.reads]
    out.append(f"saves ({len(r.saves)}):")
    out += [f"  {_t(s.created_at)} {s.agent_id}: {s.note} (read {s.read_id or '-'})" for s in r.saves]
    out.append(f"audit ({len(r.audit)}):")
    out += [f"  {_t(a.created_at)} {a.kind} by {a.agent_id}: {a.reason}" for a in r.audit]
    return frame_text("\n".join(out))


def _t(when: Any) -> str:
    return when.isoformat(timespec="seconds") if when is not None else "-"
