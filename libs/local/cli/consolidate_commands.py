"""`echo-memory consolidate [--scope S] [--dry-run]`, `consolidate log`, `consolidate undo RUN`,
`consolidate abstract [--write | --list]`, `brief`.

Consolidation places every fact in a tier (hot, consolidated, archived) and builds digests;
it never edits or deletes a fact (docs/consolidation.md). Each command is one bus request to the
consolidation service, as the org's admin, except `consolidate abstract` without `--list`: the
opt-in model command in model_commands.py (docs/distil.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.config.consolidation import ConsolidationSettings
from echo_memory.libs.core.contracts.consolidation import (
    BriefInput,
    ConsolidateInput,
    ConsolidateLogInput,
    ConsolidateUndoInput,
    DigestAbstractsInput,
    Prewarm,
    TierCounts,
)
from echo_memory.libs.core.contracts.verbs import (
    BRIEF,
    CONSOLIDATE,
    CONSOLIDATE_LOG,
    CONSOLIDATE_UNDO,
    DIGEST_ABSTRACTS,
)
from echo_memory.libs.local.cli.output import print_json
from echo_memory.libs.local.connection import admin_command
from echo_memory.libs.server import eventloop


def register(sub: Any) -> None:
    parser = sub.add_parser("consolidate", help="place facts in tiers and build entity digests (never deletes)")
    parser.add_argument("--scope", help="one scope (default: every scope)")
    parser.add_argument("--dry-run", action="store_true", help="say what would move and be built, change nothing")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=consolidate)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    log = actions.add_parser("log", help="what each run placed, promoted, demoted and built, newest first")
    log.add_argument("--scope", help="only this scope's runs")
    log.add_argument("--limit", type=int, default=20, help="at most this many runs (1-500)")
    log.add_argument("--json", action="store_true", help="print the runs as JSON")
    log.set_defaults(func=consolidate_log)
    undo = actions.add_parser("undo", help="put back the tier moves and digest versions of one run")
    undo.add_argument("run_id", metavar="RUN", help="a run id from `echo-memory consolidate log`")
    undo.set_defaults(func=consolidate_undo)
    abstract = actions.add_parser("abstract", help="opt-in: your own model writes an abstract of each digest, "
                                  "citing its facts (dry run unless --write; --list shows the stored ones)")
    abstract.add_argument("--write", action="store_true", help="store the abstracts that pass every check "
                          "(default: ask the model and print, store nothing)")
    abstract.add_argument("--list", action="store_true", help="print the stored abstracts of current digests; "
                          "asks no model")
    abstract.add_argument("--scope", help="only this scope's digests (default: every scope it may write, or read "
                          "with --list)")
    abstract.add_argument("--limit", type=int, default=50, help="at most this many digests sent (default 50), "
                          "or abstracts listed")
    abstract.add_argument("--json", action="store_true", help="print the report (or the list) as JSON")
    abstract.set_defaults(func=consolidate_abstract)

    brief = sub.add_parser("brief", help="what memory knows, from its digests, within a token budget")
    brief.add_argument("--project", help="favour facts written in this project")
    brief.add_argument("--scope", action="append", help="brief from this scope (repeatable; default: every scope)")
    brief.add_argument("--max-tokens", type=int, default=600, help="budget for the brief's text (50-8000)")
    brief.add_argument("--json", action="store_true", help="print the result as JSON")
    brief.set_defaults(func=print_brief)
    register_benchmark(sub)
    register_keepup(sub)


def _counts_line(c: TierCounts) -> str:
    return (f"hot {c.hot}, consolidated {c.consolidated}, archived {c.archived}; "
            f"{c.promoted} promoted, {c.demoted} demoted, {c.unchanged} unchanged, {c.placed} placed for the first time; "
            f"digests: {c.digests_built} built, {c.digests_unchanged} unchanged, {c.digests_ended} ended; "
            f"{c.skipped} skipped, {c.failed} failed")


def _prewarm_note(prewarm: Prewarm | None) -> str:
    if prewarm is None:
        return ""
    if prewarm.unavailable:
        return f"; buffer cache not reloaded: {prewarm.unavailable}"
    left_out = f" ({', '.join(prewarm.skipped)} left out: larger than the cache)" if prewarm.skipped else ""
    return f"; {prewarm.pages} pages of the hot search read back into the buffer cache{left_out}"


def consolidate(settings: Settings, args: argparse.Namespace) -> int:
    """Prints one line per scope run (or the JSON); exit 1 with one line on stderr when refused or down."""
    result = admin_command(settings, CONSOLIDATE, ConsolidateInput(scope=args.scope, dry_run=args.dry_run),
                           "consolidate")
    if result is None:
        return 1
    if args.json:
        print_json(result)
        return 0
    if not result.runs:
        print("no scopes to consolidate")
    for run in result.runs:
        label = "dry run" if result.dry_run else f"run {run.run_id}"
        print(f"{run.scope}: {label} (policy v{run.policy_version}): {_counts_line(run.counts)}{_prewarm_note(run.prewarm)}")
    if result.dry_run:
        print("nothing was changed; run again without --dry-run to apply")
    return 0


def consolidate_abstract(settings: Settings, args: argparse.Namespace) -> int:
    """`--list`: the stored abstracts, framed as recalled data (or JSON); else the model command's exit code."""
    if not args.list:
        from echo_memory.libs.local.cli import model_commands  # the only CLI module that reaches the model

        return model_commands.run_abstract(settings, args)
    if not 1 <= args.limit <= 500:
        print("echo-memory consolidate abstract: --limit must be 1-500 with --list", file=sys.stderr)
        return 2
    result = admin_command(settings, DIGEST_ABSTRACTS, DigestAbstractsInput(scope=args.scope, limit=args.limit),
                           "consolidate abstract")
    if result is None:
        return 1
    if args.json:
        print_json(result)
    else:
        print(result.note or result.text)
    return 0


def consolidate_log(settings: Settings, args: argparse.Namespace) -> int:
    """Prints the newest runs, or `no consolidation runs yet`."""
    result = admin_command(settings, CONSOLIDATE_LOG, ConsolidateLogInput(scope=args.scope, limit=args.limit),
                           "consolidate log")
    if result is None:
        return 1
    if args.json:
        print_json(result)
        return 0
    if not result.runs:
        print("no consolidation runs yet")
    for run in result.runs:
        undone = f", undone {run.undone_at:%Y-%m-%d %H:%M}" if run.undone_at else ""
        print(f"{run.run_id}  {run.started_at:%Y-%m-%d %H:%M:%S}  {run.scope}  by {run.actor}{undone}\n"
              f"    {_counts_line(run.counts)}")
    return 0


def consolidate_undo(settings: Settings, args: argparse.Namespace) -> int:
    result = admin_command(settings, CONSOLIDATE_UNDO, ConsolidateUndoInput(run_id=args.run_id), "consolidate undo")
    if result is None:
        return 1
    print(f"run {result.run_id} undone: {result.reverted} facts back in their earlier tier, {result.skipped} left "
          f"where a later run put them; {result.digests_reverted} digest versions ended, "
          f"{result.digests_reopened} reopened")
    return 0


def print_brief(settings: Settings, args: argparse.Namespace) -> int:
    """Prints the framed brief (or a note saying why it is empty)."""
    request = BriefInput(project=args.project, max_tokens=args.max_tokens, scope=args.scope or None)
    result = admin_command(settings, BRIEF, request, "brief")
    if result is None:
        return 1
    if args.json:
        print_json(result)
        return 0
    if result.note and not result.items:
        print(result.note)
        return 0
    print(result.text)
    return 0


def register_benchmark(sub: Any) -> None:
    parser = sub.add_parser("benchmark-tiers",
                            help="recall and cost of a consolidated search against a flat one, in a throw-away system")
    parser.add_argument("--agent-facts", required=True, metavar="PATH",
                        help="the agent-facts JSON file (its facts are planted old and never read)")
    parser.add_argument("--sizes", default="10000", help="distractor counts, comma-separated (e.g. 10000,100000)")
    parser.add_argument("--history", choices=("org", "flat"), default="org",
                        help="distractors: an organisation's year of memory per size (agents, projects, restated "
                        "edges, look-alike names, reads; default), or one agent's facts in one growing store")
    parser.add_argument("--vector-cache", metavar="DIR", type=Path,
                        help="keep the org history's fact vectors in DIR and reuse them when the same size runs "
                        "again (a million facts: ~94 CPU-minutes of the model saved; ~1.5 GB on disk)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=benchmark_tiers)


def register_keepup(sub: Any) -> None:
    parser = sub.add_parser("benchmark-keepup",
                            help="writes at the machine's pace, alone and beside consolidation runs, in a throw-away "
                            "system")
    parser.add_argument("--facts", type=int, default=10_000, help="facts of an org history loaded first (default 10000)")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each of the four phases (default 30)")
    parser.add_argument("--quiet-seconds", type=float, default=30.0,
                        help="length of the phase before them, of searches with no writes or runs (default 30)")
    parser.add_argument("--writers", type=int, default=2, help="agents writing back to back (default 2)")
    parser.add_argument("--vector-cache", metavar="DIR", type=Path,
                        help="keep the org history's fact vectors in DIR and reuse them (as benchmark-tiers)")
    parser.add_argument("--hot-copy-seconds", type=float, default=ConsolidationSettings().hot_copy_seconds,
                        help="how often the consolidation service copies facts written since the last run into the "
                        "hot tier's indexes (default %(default)s; 0: only runs copy them)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=benchmark_keepup)


def benchmark_keepup(settings: Settings, args: argparse.Namespace) -> int:
    """Prints each phase (quiet, alone, beside runs, alone, beside runs) and a summary; exit 2 for a
    count or length out of range."""
    from echo_memory.libs.local.eval import keepup

    if (args.facts < 0 or args.seconds <= 0 or args.quiet_seconds <= 0 or args.writers < 1
            or args.hot_copy_seconds < 0):
        print("echo-memory benchmark-keepup: --facts wants ≥ 0, --seconds and --quiet-seconds > 0, --writers ≥ 1 "
              "and --hot-copy-seconds ≥ 0", file=sys.stderr)
        return 2
    report = eventloop.run(keepup.run(args.facts, args.seconds, args.writers, vector_cache=args.vector_cache,
                                      hot_copy_seconds=args.hot_copy_seconds, quiet_seconds=args.quiet_seconds,
                                      show=not args.json),
                           use_uvloop=settings.uvloop)
    print(json.dumps(report, indent=2) if args.json else f"summary: {report['summary']}")
    return 0


def benchmark_tiers(settings: Settings, args: argparse.Namespace) -> int:
    """Prints each size's four arms (flat, every tier, hot, hot with the gold facts read lately), the
    consolidated-against-hot ratio, the invariants and, for several sizes, the search on every
    size by turns (each size's row also goes to stderr as it ends); exit 2 for a bad path or size list, or a
    vector cache asked of the flat history."""
    from echo_memory.libs.local.eval import tier_bench

    if not Path(args.agent_facts).is_file():
        print(f"echo-memory benchmark-tiers: {args.agent_facts} is not a file", file=sys.stderr)
        return 2
    try:
        sizes = [int(part) for part in args.sizes.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(size < 0 for size in sizes):
        print(f"echo-memory benchmark-tiers: --sizes wants whole numbers ≥ 0, got {args.sizes!r}", file=sys.stderr)
        return 2
    if args.vector_cache is not None and args.history != "org":
        print("echo-memory benchmark-tiers: --vector-cache serves the org history only", file=sys.stderr)
        return 2
    report = eventloop.run(tier_bench.run(args.agent_facts, sizes, history=args.history, show=not args.json,
                                          vector_cache=args.vector_cache),
                           use_uvloop=settings.uvloop)
    print(json.dumps(report, indent=2) if args.json else tier_bench.render(report))
    return 0
