"""`echo-memory forget`: erase a fact, an entity or a scope from every place it lives, as the org's admin.

Dry run by default: prints what would go (rows per table and their ids) and changes nothing.
`--confirm` erases in one transaction (verb `forget`), then vacuums the touched tables and deletes
the event stream's messages about the erased rows (verb `forget_finish`). `--search TERM` lists
candidates and never erases; `--log` prints the erasure log, which holds no content; `--finish ID`
runs the second step again when it was interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.core.contracts.forget import (
    ForgetFinishInput,
    ForgetFinishResult,
    ForgetInput,
    ForgetLogInput,
    ForgetResult,
)
from echo_memory.libs.core.contracts.verbs import FORGET, FORGET_FINISH, FORGET_LOG
from echo_memory.libs.local.cli.output import print_json
from echo_memory.libs.local.connection import admin_call
from echo_memory.libs.server import eventloop


def register(sub: Any) -> None:
    parser = sub.add_parser("forget", help="erase a fact, an entity or a scope everywhere (dry run unless --confirm)")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--fact", metavar="ID", help="a fact: every version of its (source, relation, target)")
    target.add_argument("--entity", metavar="NAME", help="an entity (name or alias): its aliases and every fact touching it")
    target.add_argument("--scope", metavar="S", help="a scope by its stored name (solo:<agent>): everything in it")
    target.add_argument("--search", metavar="TERM", help="list facts and entities holding TERM; erases nothing")
    target.add_argument("--log", action="store_true", help="print the erasure log (no content)")
    target.add_argument("--finish", metavar="ERASURE_ID",
                        help="vacuum and clean the event stream again for an erasure whose finishing was interrupted")
    parser.add_argument("--in", dest="in_scope", default="shared", metavar="SCOPE",
                        help="the scope --entity is in (default shared)")
    parser.add_argument("--confirm", action="store_true", help="erase; without it nothing changes")
    parser.add_argument("--reason", default="", help="why (recorded in the erasure log; required with --confirm)")
    parser.add_argument("--ref", help="the ticket or request this erasure answers (recorded)")
    parser.add_argument("--by", help="the person who asked for it (recorded; default: admin)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(func=forget)


def forget(settings: Settings, args: argparse.Namespace) -> int:
    """Prints what went or would go and exits 0; 1 with one line on stderr for a typed error (nothing changed)."""
    try:
        return int(eventloop.run(_forget(settings, args), use_uvloop=settings.uvloop))
    except EchoError as exc:
        print(f"echo-memory forget: {exc.code}: {exc.message}", file=sys.stderr)
        return 1


async def _forget(settings: Settings, args: argparse.Namespace) -> int:
    if args.log:
        log = await admin_call(settings, FORGET_LOG, ForgetLogInput())
        if args.json:
            print_json(log)
            return 0
        if not log.erasures:
            print("no erasures")
        for e in log.erasures:
            counts = ", ".join(f"{k} {v}" for k, v in e.counts.items() if v)
            print(f"{e.erased_at:%Y-%m-%d %H:%M:%S} {e.id} {e.target_kind} {e.target_id} in {e.scope} by {e.erased_by} "
                  f"(as {e.actor}) ref {e.ref or '-'}: {e.reason} [{counts}]"
                  f"{'' if e.finished_at else ' (not finished: run forget --finish ID)'}")
        return 0
    if args.finish:
        done = await admin_call(settings, FORGET_FINISH, ForgetFinishInput(erasure_id=args.finish))
        print(json.dumps(done.model_dump(mode="json"), indent=2) if args.json else
              f"vacuumed {len(done.vacuumed)} tables; event stream: {done.stream}")
        return 0
    request = ForgetInput(confirm=args.confirm, reason=args.reason, ref=args.ref, by=args.by, in_scope=args.in_scope,
                          fact_id=args.fact, entity=args.entity, scope=args.scope, search=args.search)
    result = await admin_call(settings, FORGET, request)
    finished: ForgetFinishResult | None = None
    if result.erasure_id is not None:
        finished = await admin_call(settings, FORGET_FINISH, ForgetFinishInput(erasure_id=result.erasure_id))
    if args.json:
        print(json.dumps({"forget": result.model_dump(mode="json"),
                          "finish": finished.model_dump(mode="json") if finished else None}, indent=2))
        return 0
    _print(result, finished)
    return 0


def _print(result: ForgetResult, finished: ForgetFinishResult | None) -> None:
    if result.target_kind is None:
        print(f"{len(result.candidates)} candidates (nothing erased):")
        for c in result.candidates:
            state = "" if c.kind == "entity" or c.current else " (ended version)"
            print(f"  {c.kind:<6} {c.id} [{c.scope}] {c.text}{state}")
        return
    head = "would erase (dry run; add --confirm --reason ... to erase)" if result.dry_run else (
        f"erased (erasure {result.erasure_id})")
    print(f"{head}: {result.target_kind} in scope {result.scope}")
    for table, count in result.counts.items():
        if count:
            ids = result.ids.get(table, [])
            more = f" (first {len(ids)} of {count} ids shown; --json has the same)" if table in result.ids_truncated else ""
            print(f"  {table:<22} {count:>6}" + (f"  {' '.join(ids)}" if ids else "") + more)
    if result.graph_mirror:
        print(f"  graph mirror: {result.graph_mirror}")
    if finished is not None:
        print(f"  vacuumed {len(finished.vacuumed)} tables; event stream: {finished.stream}")
