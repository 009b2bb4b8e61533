"""`echo-memory dashboard --serve [--open]`, `echo-memory dashboard --out FILE` and `echo-memory demo-seed`.

The dashboard is a web page on 127.0.0.1 over the running system's bus (services/dashboard/);
demo-seed fills a new scope with an invented software org, restored through the audit service's
import like any export file, so screenshots never show a real memory's host or client names.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.admin import NoArgs
from echo_memory.libs.core.contracts.audit import ExportFileError
from echo_memory.libs.core.contracts.demo import DEMO_PREFIX, DEMO_SCOPE, is_demo_scope
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.local.backup import Call, import_lines
from echo_memory.libs.local.cli.audit_commands import admin_session
from echo_memory.libs.local.connection import admin_call, connect_bus
from echo_memory.libs.local.supervisor.ports import port_in_use
from echo_memory.libs.server import eventloop

if TYPE_CHECKING:  # the demo data embeds with the model: loaded only by demo-seed itself
    from echo_memory.libs.local.demo.seed import Embed

DEFAULT_PORT = 8790
DEMO_FACTS = 1200


def register(sub: Any) -> None:
    dash = sub.add_parser("dashboard", help="the memory graph in your browser (127.0.0.1 only, per-run secret)")
    dash.add_argument("--serve", action="store_true", help="serve the dashboard until Ctrl-C (required)")
    dash.add_argument("--open", action="store_true", help="also open it in the default web browser")
    dash.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"loopback port (default {DEFAULT_PORT})")
    dash.add_argument("--out", metavar="FILE", type=Path,
                      help="instead of serving, write a self-contained HTML snapshot of the graph to FILE (mode 0600)")
    dash.add_argument("--scope", default="",
                      help="with --out: comma-separated scopes (default every readable scope but demo-seed's demo, demo-*)")
    dash.set_defaults(func=_dashboard)

    demo = sub.add_parser("demo-seed", help="fill a demo scope with an invented software org, for screenshots")
    demo.add_argument("--scope", default=DEMO_SCOPE, help=f"scope to create and fill (default {DEMO_SCOPE}); named "
                      f"{DEMO_SCOPE} or {DEMO_PREFIX}<name>, which health, status and the dashboard leave out unless "
                      "asked; it must not hold memory yet")
    demo.add_argument("--remove", action="store_true",
                      help="take the demo scope out again: names the audited erasure command that removes it")
    demo.add_argument("--facts", type=int, default=DEMO_FACTS, help=f"about how many fact versions (default {DEMO_FACTS})")
    demo.add_argument("--seed", type=int, default=0, help="random seed: the same seed gives the same org")
    demo.set_defaults(func=_demo_seed)


def _dashboard(settings: Settings, args: Any) -> int:
    """Serve until Ctrl-C, or write a snapshot with --out; 2 for a usage error or a taken port, 1 when the
    system is not running or refuses."""
    if args.serve and args.out:
        print("echo-memory dashboard: --serve and --out exclude each other", file=sys.stderr)
        return 2
    if args.out:
        return _snapshot(settings, args.out, [s.strip() for s in args.scope.split(",") if s.strip()] or None)
    if not args.serve:
        print("echo-memory dashboard: pass --serve to start it (add --open to open your browser), "
              "or --out FILE for a snapshot to share", file=sys.stderr)
        return 2
    if not 0 < args.port < 65536 or port_in_use(args.port):
        print(f"echo-memory dashboard: port {args.port} is not free on 127.0.0.1; choose another with --port",
              file=sys.stderr)
        return 2

    async def run() -> int:
        from echo_memory.libs.server.service.registry import entry_point

        serve = entry_point("serve_dashboard")

        broker = await connect_bus(settings)
        return int(await serve(settings, broker, args.port, args.open))

    try:
        return eventloop.run(run(), use_uvloop=settings.uvloop)
    except EchoError as exc:
        print(f"echo-memory dashboard: {exc.message}", file=sys.stderr)
        return 1


def _snapshot(settings: Settings, out: Path, scopes: list[str] | None) -> int:
    """Write the snapshot to `out`; prints what it holds. 1 when the system refuses or the file cannot be written."""
    from echo_memory.libs.server.bus.broker import stop_broker
    from echo_memory.libs.server.bus.client import BusClient
    from echo_memory.services.dashboard.snapshot import write_snapshot

    async def run() -> int:
        broker = await connect_bus(settings)
        try:
            shot = await write_snapshot(settings, BusClient(broker), out.expanduser(), scopes)
        finally:
            await stop_broker(broker)
        left = f"; {shot.entities_left_out} less-connected entities' facts left out" if shot.entities_left_out else ""
        print(f"echo-memory dashboard: wrote {shot.path} ({shot.bytes} bytes, mode 0600): {shot.nodes} entities, "
              f"{shot.edges} facts, the facts of {shot.entities_inlined} entities{left}. It needs no server and holds "
              "no token; it does hold the memory's text, so share it as you would the memory itself.")
        return 0

    try:
        return eventloop.run(run(), use_uvloop=settings.uvloop)
    except EchoError as exc:
        print(f"echo-memory dashboard: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"echo-memory dashboard: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1


def _demo_seed(settings: Settings, args: Any) -> int:
    """Create and fill the scope; prints what was restored. 2 for a bad argument, 1 when the system refuses.

    With --remove: 0 when the scope holds nothing; otherwise 1 and the erasure command to run, since
    taking memory out goes through the audited erasure path only (demo-seed never deletes).
    """
    if not is_demo_scope(args.scope):
        print(f"echo-memory demo-seed: --scope must be {DEMO_SCOPE} or start with {DEMO_PREFIX} "
              f"(got {args.scope!r}), so demo data is never mistaken for real memory", file=sys.stderr)
        return 2
    if args.remove:
        try:
            return eventloop.run(_remove(settings, args.scope), use_uvloop=settings.uvloop)
        except EchoError as exc:
            print(f"echo-memory demo-seed: {exc.code}: {exc.message}", file=sys.stderr)
            return 1
    if not 1 <= args.facts <= 200_000:
        print("echo-memory demo-seed: --facts must be between 1 and 200000", file=sys.stderr)
        return 2
    try:
        return eventloop.run(_seed(settings, args.scope, args.facts, args.seed), use_uvloop=settings.uvloop)
    except EchoError as exc:
        print(f"echo-memory demo-seed: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except ExportFileError as exc:
        print(f"echo-memory demo-seed: refused, nothing was written: {exc}", file=sys.stderr)
        return 2


async def _remove(settings: Settings, scope: str) -> int:
    from echo_memory.libs.core.contracts.verbs import STATUS

    status = await admin_call(settings, STATUS, NoArgs())
    found = next((s for s in status.scopes if s.scope == scope), None)
    if found is None or found.facts == 0:
        print(f"demo-seed: scope '{scope}' holds no demo memory; nothing to remove")
        return 0
    print(f"echo-memory demo-seed: scope '{scope}' holds {found.facts} invented fact versions; demo-seed does not "
          f"erase memory itself. Remove it with the audited erasure:\n  echo-memory forget --scope {scope} --confirm",
          file=sys.stderr)
    return 1


async def _seed(settings: Settings, scope: str, facts: int, seed: int) -> int:
    async with admin_session(settings) as call:
        counts = await seed_scope(call, settings, scope, facts, seed)
    print(f"demo-seed: scope '{scope}' holds {counts['fact']} invented fact versions, {counts['entity']} entities, "
          f"{counts['read']} reads and {counts['recall_save']} saves; open it with `echo-memory dashboard --serve`")
    return 0


async def seed_scope(call: Call, settings: Settings, scope: str, facts: int, seed: int = 0,
                     embed: Embed | None = None) -> dict[str, int]:
    """Build the invented org, restore it into `scope`, rebuild the scope's BM25 statistics; the record counts.

    `embed` defaults to the product's model, loaded here. Raises ExportFileError or EchoError
    (import refuses a scope that already holds memory).
    """
    from echo_memory.libs.local.demo.seed import demo_export

    if embed is None:
        from echo_memory.libs.server.embed import MiniLM

        embed = MiniLM().embed
    # Minutes of embedding at 10k facts: off the event loop, so the bus connection keeps answering pings.
    lines = await asyncio.to_thread(demo_export, facts, org=settings.org, scope=scope, embed=embed,
                                    now=datetime.now(UTC), seed=seed)
    await import_lines(call, lines, scope=None, progress=None, timeout=settings.timeouts.bulk,
                       chunk_bytes=settings.backup_page_bytes)
    await call("reindex", "reindex", {"scope": scope, "step": "lexical"}, settings.timeouts.bulk)
    counts: dict[str, int] = lines[0]["counts"]
    return counts
