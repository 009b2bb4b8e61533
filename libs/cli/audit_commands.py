"""`echo-memory why FACT_ID`, `echo-memory export`, `echo-memory import FILE` — over the bus, as the org admin.

export streams pages from the audit service into JSON Lines (header, records, end line) and
reports progress on stderr. import reads and checks the whole file here first — a foreign,
malformed or truncated file is refused before anything is sent — then stages it in chunks and
asks the audit service to restore it in one transaction.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

from libs import eventloop
from libs.config import Settings
from libs.contracts.audit import SECTIONS, ExportFileError, ImportResult, WhyResult, parse_export
from libs.contracts.errors import EchoError

Call = Callable[[str, str, dict[str, Any], float], Awaitable[dict[str, Any]]]

EXPORT_PAGE = 1000
# Staged chunks stay well under NATS's default 1 MB message limit.
CHUNK_BYTES = 400_000
CHUNK_LINES = 2000


def register(sub: Any) -> None:
    why_p = sub.add_parser("why", help="the full trail of one fact: versions, entities, reads, saves, audit rows")
    why_p.add_argument("fact_id")
    why_p.add_argument("--json", action="store_true", help="print the raw result as JSON")
    why_p.set_defaults(func=lambda s, a: _run(s, "why", _why(s, a.fact_id, a.json)))

    export = sub.add_parser("export", help="everything (or one scope) as versioned JSON Lines")
    export.add_argument("--scope", help="one scope by its stored name (solo scopes: solo:<agent>)")
    export.add_argument("--out", help="file to write (default: standard output)")
    export.set_defaults(func=lambda s, a: _run(s, "export", _export(s, a.scope, a.out)))

    imp = sub.add_parser("import", help="restore an export into an empty org or scope")
    imp.add_argument("file")
    imp.add_argument("--scope", help="restore the file's only scope under this name")
    imp.set_defaults(func=lambda s, a: _run(s, "import", _import(s, a.file, a.scope)))


def _run(settings: Settings, command: str, work: Awaitable[int]) -> int:
    from libs.cli.connection import NotRunning

    try:
        return eventloop.run(work, use_uvloop=settings.uvloop)  # type: ignore[arg-type]
    except EchoError as exc:
        print(f"echo-memory {command}: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except (ExportFileError, OSError) as exc:
        print(f"echo-memory {command}: refused, nothing was written: {exc}", file=sys.stderr)
        return 2
    except NotRunning as exc:
        print(f"echo-memory {command}: {exc}", file=sys.stderr)
        return 1


@asynccontextmanager
async def admin_session(settings: Settings) -> AsyncIterator[Call]:
    """One bus connection for a whole command, calling as the org's admin identity."""
    from libs.bus.broker import make_broker
    from libs.bus.client import BusClient
    from libs.cli.connection import ADMIN_AGENT, nats_url
    from libs.contracts.bus import Caller

    broker = make_broker(nats_url(settings))
    await broker.start()
    client = BusClient(broker)
    caller = Caller(org=settings.org, agent_id=ADMIN_AGENT, read_scopes=["*"], write_scopes=["*"])

    async def call(service: str, verb: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
        return await client.call(caller=caller, service=service, verb=verb, args=args, timeout=timeout)

    try:
        yield call
    finally:
        await broker.stop()


# ---- export ------------------------------------------------------------------------------------


async def export_to(call: Call, out: TextIO, *, scope: str | None, progress: TextIO | None, timeout: float) -> dict[str, int]:
    """Write a whole export to `out`; returns the records written per section."""
    counts = dict.fromkeys(SECTIONS, 0)
    expected: dict[str, int] = {}
    cursor: str | None = None
    while True:
        args: dict[str, Any] = {"limit": EXPORT_PAGE, **({"scope": scope} if scope else {})}
        if cursor:
            args["cursor"] = cursor
        page = await call("audit", "export", args, timeout)
        if page.get("header"):
            expected = page["header"]["counts"]
            out.write(_line(page["header"]))
        for record in page["records"]:
            counts[record["type"]] += 1
            out.write(_line(record))
        if progress is not None:
            done, total = sum(counts.values()), sum(expected.values())
            progress.write(f"\rexported {done}/{total} records")
            progress.flush()
        cursor = page.get("next_cursor")
        if not cursor:
            break
    out.write(_line({"type": "end", "counts": counts}))
    if progress is not None:
        progress.write("\n" + ", ".join(f"{n}: {c}" for n, c in counts.items() if c) + "\n")
    return counts


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


async def _export(settings: Settings, scope: str | None, out: str | None) -> int:
    async with admin_session(settings) as call:
        if out is None:
            await export_to(call, sys.stdout, scope=scope, progress=sys.stderr, timeout=settings.timeouts.bulk)
            return 0
        path = Path(out)
        partial = path.with_name(path.name + ".partial")
        with partial.open("w", encoding="utf-8") as handle:
            await export_to(call, handle, scope=scope, progress=sys.stderr, timeout=settings.timeouts.bulk)
        partial.replace(path)  # a failed export never leaves a file that looks complete
    print(f"wrote {path}", file=sys.stderr)
    return 0


# ---- import ------------------------------------------------------------------------------------


def read_export_file(path: str | Path) -> list[Any]:
    """Every line of the file, JSON-decoded and checked as a whole export (raises ExportFileError)."""
    lines: list[Any] = []
    with Path(path).open(encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                lines.append(json.loads(text))
            except json.JSONDecodeError as exc:
                raise ExportFileError(f"line {number} is not JSON ({exc.msg})") from None
    parse_export(lines)
    return lines


async def import_lines(
    call: Call, lines: list[Any], *, scope: str | None, progress: TextIO | None, timeout: float
) -> ImportResult:
    """Stage `lines` (already checked) in chunks, then restore them in one transaction."""
    parse_export(lines)
    import_id = str(uuid.uuid4())
    start = 0
    while start < len(lines):
        size, end = 0, start
        while end < len(lines) and end - start < CHUNK_LINES and (end == start or size < CHUNK_BYTES):
            size += len(_line(lines[end]))
            end += 1
        await call("audit", "import_stage", {"import_id": import_id, "first_line": start, "lines": lines[start:end]},
                   timeout)
        start = end
        if progress is not None:
            progress.write(f"\rsent {start}/{len(lines)} lines")
            progress.flush()
    args: dict[str, Any] = {"import_id": import_id, **({"scope": scope} if scope else {})}
    result = ImportResult.model_validate(await call("audit", "import", args, timeout))
    if progress is not None:
        progress.write("\n")
    return result


async def _import(settings: Settings, file: str, scope: str | None) -> int:
    lines = read_export_file(file)
    async with admin_session(settings) as call:
        result = await import_lines(call, lines, scope=scope, progress=sys.stderr, timeout=settings.timeouts.bulk)
    print(json.dumps(result.model_dump(mode="json"), indent=2))
    kept = "kept" if result.ids_kept else f"remapped ({len(result.id_map)} ids, see id_map)"
    print(f"restored scopes {', '.join(result.scopes)}; ids {kept}; run `echo-memory reindex` to rebuild BM25 "
          "statistics", file=sys.stderr)
    return 0


# ---- why ---------------------------------------------------------------------------------------


async def _why(settings: Settings, fact_id: str, as_json: bool) -> int:
    async with admin_session(settings) as call:
        result = WhyResult.model_validate(await call("audit", "why", {"fact_id": fact_id}, settings.timeouts.read))
    print(result.model_dump_json(indent=2) if as_json else render_why(result))
    return 0


def render_why(r: WhyResult) -> str:
    """The trail as text for a person, newest knowledge last."""
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
    out.append(f"reads that returned it ({len(r.reads)}):")
    out += [f"  {_t(x.created_at)} {x.agent_id} rank {x.rank} score {x.score:.3f} query {x.query!r} (read {x.read_id})"
            for x in r.reads]
    out.append(f"saves ({len(r.saves)}):")
    out += [f"  {_t(s.created_at)} {s.agent_id}: {s.note} (read {s.read_id or '-'})" for s in r.saves]
    out.append(f"audit ({len(r.audit)}):")
    out += [f"  {_t(a.created_at)} {a.kind} by {a.agent_id}: {a.reason}" for a in r.audit]
    return "\n".join(out)


def _t(when: Any) -> str:
    return when.isoformat(timespec="seconds") if when is not None else "-"
