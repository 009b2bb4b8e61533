"""Commands around retrieval: recall, reindex, eval, eval-external, benchmark (issue 4)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from libs import eventloop

DATASETS = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


def register(sub: Any) -> None:
    recall = sub.add_parser("recall", help="query memory from the terminal (same results as query_memory)")
    recall.add_argument("question")
    recall.add_argument("--scope", action="append", help="scope to read (repeatable); default shared")
    recall.add_argument("--top-k", type=int, default=10)
    recall.add_argument("--as-of", type=int, help="Unix seconds: the store as it was then")
    recall.add_argument("--about", action="append", help="entity name (once or twice)")
    recall.add_argument("--no-episodes", action="store_true", help="facts only")
    recall.add_argument("--max-tokens", type=int)
    recall.add_argument("--json", action="store_true", help="print the raw result")
    recall.set_defaults(func=_recall)

    reindex = sub.add_parser("reindex", help="rebuild embeddings and lexical statistics of a scope")
    reindex.add_argument("--scope", default="shared")
    reindex.add_argument("--status", action="store_true", help="only show whether queries use BM25 or ts_rank")
    reindex.add_argument("--lexical-only", action="store_true", help="skip re-embedding")
    reindex.set_defaults(func=_reindex)

    evaluate = sub.add_parser("eval", help="retrieval quality on agent-facts (hit@1, hit@10, MRR over the ranking and MRR@10, by kind)")
    evaluate.add_argument("--dataset", default=str(DATASETS / "agent-facts" / "agent-facts.json"))
    evaluate.add_argument("--context", action="store_true", help="tokens per recall vs a full notes dump")
    evaluate.add_argument("--json", action="store_true")
    from libs.eval.experiments import add_arguments as add_experiment_arguments  # --sweep, --ablate, --mixed

    add_experiment_arguments(evaluate)
    evaluate.set_defaults(func=_eval)

    external = sub.add_parser("eval-external", help="retrieval on a public benchmark (locomo)")
    external.add_argument("benchmark", choices=["locomo", "madial"])
    external.add_argument("path", nargs="?", help="dataset file (default: ../shared/datasets)")
    external.add_argument("--conversations", type=int, help="only the first N conversations")
    external.add_argument("--questions", type=int, help="only the first N questions of each")
    external.add_argument("--query-mode", default="context", help="madial: context | last-user | recent-first")
    external.add_argument(
        "--fusion-grid", metavar="SPEC",
        help='locomo: re-rank every question under each fusion weighting of SPEC, e.g. "neighbour=0.15,0.225 '
        'reply=0.4,0.6" (throw-away system; the service\'s own weighting is the row marked "service")',
    )
    external.set_defaults(func=_external)

    from libs.eval.benchmark import register as register_benchmark  # issue 4: the latency harness

    register_benchmark(sub)


def _call(settings: Any):  # type: ignore[no-untyped-def]
    from libs.cli.connection import admin_call

    async def call(service: str, verb: str, args: dict[str, Any]) -> dict[str, Any]:
        return await admin_call(settings, service, verb, args, timeout=settings.timeouts.bulk)

    return call


def _recall(settings: Any, args: Any) -> int:
    from libs.contracts.errors import EchoError
    from services.edge.render import render_recall

    body: dict[str, Any] = {"query": args.question, "top_k": args.top_k, "include_episodes": not args.no_episodes}
    if args.scope:
        body["scope"] = args.scope if len(args.scope) > 1 else args.scope[0]
    for key in ("as_of", "about", "max_tokens"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    try:
        result = eventloop.run(_call(settings)("retrieval", "query_memory", body), use_uvloop=settings.uvloop)
    except EchoError as exc:
        print(f"echo-memory recall: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else render_recall(result))
    return 0


def _reindex(settings: Any, args: Any) -> int:
    from libs.contracts.errors import EchoError
    from libs.eval.runner import progress

    async def run() -> None:
        call = _call(settings)
        if args.status:
            print(json.dumps(await call("reindex", "lexical_status", {"scope": args.scope}), indent=2))
            return
        stats = await call("reindex", "reindex", {"scope": args.scope, "step": "lexical"})
        progress("lexical statistics", stats["total"], stats["total"])
        if args.lexical_only:
            return
        cursor: str | None = None
        done = 0
        while True:
            page = await call("reindex", "reindex", {"scope": args.scope, "step": "embeddings", "after": cursor})
            done += page["processed"]
            progress("embeddings", done if page["next"] else page["total"], page["total"])
            cursor = page["next"]
            if cursor is None:
                break

    try:
        eventloop.run(run(), use_uvloop=settings.uvloop)
    except EchoError as exc:
        print(f"echo-memory reindex: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    return 0


def _eval(settings: Any, args: Any) -> int:
    from libs.eval.runner import run_agent_facts

    if args.sweep or args.ablate or args.mixed:
        from libs.eval.experiments import run as run_experiments

        print(json.dumps(run_experiments(args, DATASETS, use_uvloop=settings.uvloop), indent=2))
        return 0
    dataset = _dataset_file("eval", args.dataset, "agent-facts.json")
    if dataset is None:
        return 2
    report = eventloop.run(
        run_agent_facts(_call(settings), str(dataset), show=True, context=args.context), use_uvloop=settings.uvloop
    )
    if not args.json:
        report.pop("per_query", None)
    print(json.dumps(report, indent=2))
    return 0


def _dataset_file(command: str, path: str, name: str) -> Path | None:
    """`path`, or `name` inside it when it is a folder; None (after saying why) when neither is a file."""
    candidate = Path(path)
    if candidate.is_dir():
        candidate = candidate / name
    if not candidate.is_file():
        print(f"echo-memory {command}: no dataset file at {candidate} (expected {name})", file=sys.stderr)
        return None
    return candidate


def _external(settings: Any, args: Any) -> int:
    from libs.eval.runner import run_locomo

    if args.benchmark == "madial":
        from libs.eval.madial import run_madial

        path = args.path or str(DATASETS / "madial_bench")
        report = eventloop.run(
            run_madial(_call(settings), path, dialogues=args.questions, mode=args.query_mode),
            use_uvloop=settings.uvloop,
        )
        print(json.dumps(report, indent=2))
        return 0
    path = _dataset_file("eval-external", args.path or str(DATASETS / "locomo"), "locomo10.json")
    if path is None:
        return 2
    if args.fusion_grid:
        from libs.eval import fusion_grid
        from services.retrieval.settings import RetrievalSettings

        retrieval = RetrievalSettings()
        try:
            grid = fusion_grid.parse_grid(args.fusion_grid, retrieval.fusion)
        except ValueError as exc:
            print(f"echo-memory eval-external: {exc}", file=sys.stderr)
            return 2
        grid_report = eventloop.run(
            fusion_grid.run(path, grid, retrieval, conversations=args.conversations, questions=args.questions),
            use_uvloop=settings.uvloop,
        )
        print(json.dumps(grid_report, indent=2))
        return 0
    report = eventloop.run(
        run_locomo(_call(settings), str(path), conversations=args.conversations, questions=args.questions, show=True),
        use_uvloop=settings.uvloop,
    )
    print(json.dumps(report, indent=2))
    return 0
