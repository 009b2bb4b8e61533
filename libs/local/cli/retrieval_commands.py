"""Commands around retrieval: recall, reindex, eval, eval-external, benchmark.

The harnesses read datasets from the paths they are given and from nowhere else: no dataset
ships with the product. They score in a throw-away system of their own (libs/local/eval/system.py),
so a run leaves nothing in the user's store and needs no running system. A missing or wrong path ends in one sentence and exit code 2, before any
connection is made.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from echo_memory.libs.server import eventloop

USAGE_ERROR = 2
# The file each harness looks for inside a folder it is given.
AGENT_FACTS_FILE = "agent-facts.json"
LOCOMO_FILE = "locomo10.json"
LONGMEMEVAL_FILE = "longmemeval_s.json"


def register(sub: Any) -> None:
    recall = sub.add_parser("recall", help="query memory from the terminal (same results as query_memory)")
    recall.add_argument("question", help="the question, in words")
    recall.add_argument("--scope", action="append", help="scope to read (repeatable); default shared")
    recall.add_argument("--top-k", type=int, default=10, help="how many results at most (default 10)")
    recall.add_argument(
        "--as-of", help="the store as it was then: Unix seconds or ISO-8601 (a whole second, minute or day means its end)"
    )
    recall.add_argument("--about", action="append", help="entity name (once or twice)")
    recall.add_argument("--no-episodes", action="store_true", help="facts only")
    recall.add_argument("--max-tokens", type=int, help="cap the recalled text at about this many tokens")
    recall.add_argument("--json", action="store_true", help="print the raw result")
    recall.set_defaults(func=_recall)

    reindex = sub.add_parser(
        "reindex", help="rebuild lexical statistics, embeddings and (with Apache AGE) the graph mirror of a scope"
    )
    reindex.add_argument("--scope", default="shared", help="the scope to rebuild (default shared)")
    reindex.add_argument("--status", action="store_true", help="only show whether queries use BM25 or ts_rank")
    reindex.add_argument("--lexical-only", action="store_true", help="skip re-embedding")
    reindex.set_defaults(func=_reindex)

    evaluate = sub.add_parser("eval", help="retrieval quality on your own store (queries made from its facts) "
                              "or on agent-facts with --dataset; scored in a throw-away copy")
    evaluate.add_argument("--dataset", metavar="PATH", help=f"{AGENT_FACTS_FILE} or the folder holding it "
                          "(default: your own store, read only)")
    evaluate.add_argument("--scope", default="shared", help="own store: the scope to evaluate (default shared)")
    evaluate.add_argument("--queries", type=int, default=60, metavar="N",
                          help="own store: facts to derive queries from, three queries each (default 60)")
    evaluate.add_argument("--seed", type=int, default=0, help="own store: which facts are chosen (default 0)")
    evaluate.add_argument("--ablate", action="store_true",
                          help="own store: each retrieval channel off in turn, paired against the full system")
    evaluate.add_argument("--context", action="store_true", help="tokens per recall vs a full notes dump")
    evaluate.add_argument("--sweep", action="store_true", help="with --context: the same as a curve across store size")
    evaluate.add_argument("--sweep-sizes", default="25,50,100,200", metavar="N,N,...",
                          help="store sizes (facts) of the --sweep curve (default 25,50,100,200)")
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON, every query's scores included")
    evaluate.set_defaults(func=_eval)

    external = sub.add_parser(
        "eval-external", help="retrieval on a public benchmark (locomo, madial, longmemeval, memdaily)"
    )
    external.add_argument("benchmark", choices=["locomo", "madial", "longmemeval", "memdaily"],
                          help="the published set to run")
    external.add_argument(
        "path", nargs="?",
        help=f"locomo: {LOCOMO_FILE} or its folder; madial: the folder of the MADial-Bench-en files; "
        f"longmemeval: a LongMemEval JSON file, or a folder holding {LONGMEMEVAL_FILE}; "
        "memdaily: the MemDaily folder or its messages_and_QAs folder (required)",
    )
    external.add_argument("--conversations", type=int, help="locomo: only the first N conversations")
    external.add_argument("--questions", type=int, help="only the first N questions of each (madial: N dialogues)")
    external.add_argument("--query-mode", default="context", help="madial: context | last-user | recent-first")
    external.add_argument("--per-type", type=int, metavar="N",
                          help="longmemeval: only the first N questions of each type; memdaily: the first N "
                          "trajectories of each file")
    external.add_argument("--json", action="store_true",
                          help="print the whole report as JSON instead of tables, with every question's scores "
                          "(the system's and, but for longmemeval, BM25's) in the file's order, so two runs can be "
                          "compared question by question")
    external.set_defaults(func=_external)

    from echo_memory.libs.local.eval.benchmark import register as register_benchmark  # the latency harness

    register_benchmark(sub)


def _recall(settings: Any, args: Any) -> int:
    from echo_memory.libs.core.contracts.errors import EchoError
    from echo_memory.libs.core.contracts.framing import render_recall
    from echo_memory.libs.core.contracts.parsing import parse_args
    from echo_memory.libs.core.contracts.query import QueryMemoryInput
    from echo_memory.libs.core.contracts.verbs import QUERY_MEMORY
    from echo_memory.libs.local.connection import admin_call

    if not args.question.strip() and not args.about:
        # Said here: the service's sentence names `digest`, a tool argument this command has no flag for.
        return _refuse("recall", "give a question (or an empty one with --about NAME: what is known about NAME)")
    body: dict[str, Any] = {"query": args.question, "top_k": args.top_k, "include_episodes": not args.no_episodes}
    if args.scope:
        body["scope"] = args.scope if len(args.scope) > 1 else args.scope[0]
    for key in ("as_of", "about", "max_tokens"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    try:
        # Parsed as the service parses it (a bad --as-of is its InvalidArgument); only the flags given are sent.
        request = parse_args(QueryMemoryInput, body)
        result = eventloop.run(admin_call(settings, QUERY_MEMORY, request), use_uvloop=settings.uvloop)
    except EchoError as exc:  # NotRunning and BusUnreachable among them
        print(f"echo-memory recall: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    shown = result.model_dump(mode="json")
    print(json.dumps(shown, indent=2) if args.json else render_recall(shown))
    return 0


def _reindex(settings: Any, args: Any) -> int:
    from echo_memory.libs.core.contracts.errors import EchoError
    from echo_memory.libs.core.contracts.reindex import LexicalStatusInput, ReindexInput
    from echo_memory.libs.core.contracts.verbs import LEXICAL_STATUS, REINDEX
    from echo_memory.libs.local.connection import admin_call
    from echo_memory.libs.local.eval.runner import progress

    async def run() -> None:
        scope = args.scope
        if args.status:
            status = await admin_call(settings, LEXICAL_STATUS, LexicalStatusInput(scope=scope))
            print(json.dumps(status.model_dump(mode="json"), indent=2))
            return
        stats = await admin_call(settings, REINDEX, ReindexInput(scope=scope, step="lexical"))
        progress("lexical statistics", stats.total, stats.total)
        if args.lexical_only:
            return
        cursor: str | None = None
        done = 0
        while True:
            page = await admin_call(settings, REINDEX, ReindexInput(scope=scope, step="embeddings", after=cursor))
            done += page.processed
            progress("embeddings", done if page.next else page.total, page.total)
            cursor = page.next
            if cursor is None:
                break
        graph = await admin_call(settings, REINDEX, ReindexInput(scope=scope, step="graph"))
        if graph.skipped:
            print(f"graph mirror: skipped ({graph.skipped})", file=sys.stderr)
        else:
            progress("graph mirror", graph.processed, graph.total)

    try:
        eventloop.run(run(), use_uvloop=settings.uvloop)
    except EchoError as exc:
        print(f"echo-memory reindex: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    return 0


def _eval(settings: Any, args: Any) -> int:
    """Score retrieval on agent-facts in a throw-away system (its own Postgres and NATS, deleted at
    the end), so the run leaves nothing in the user's store and needs no running system."""
    from echo_memory.libs.local.eval.report import render_eval, render_sweep
    from echo_memory.libs.local.eval.runner import run_agent_facts, run_context_sweep

    if args.sweep and not args.context:
        return _refuse("eval", "--sweep draws the --context curve: give both")
    sizes = _sizes(args.sweep_sizes)
    if sizes is None:
        return _refuse("eval", f"--sweep-sizes takes positive integers separated by commas, not {args.sweep_sizes!r}")
    if args.dataset is None:
        return _eval_own(settings, args, sizes)
    if args.ablate:
        return _refuse("eval", "--ablate runs on your own store: leave out --dataset")
    dataset = _dataset_file("eval", args.dataset, AGENT_FACTS_FILE)
    if dataset is None:
        return USAGE_ERROR

    def job(call: Any) -> Any:
        if args.sweep:
            return run_context_sweep(call, str(dataset), sizes, show=True)
        return run_agent_facts(call, str(dataset), show=True, context=args.context)

    report = _run_harness(settings, "eval", _throwaway(settings, job))
    if report is None:
        return 1
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render_sweep(report) if args.sweep else render_eval(report))
    return 0


def _eval_own(settings: Any, args: Any, sizes: list[int]) -> int:
    """Score retrieval on the user's own scope: read it over the bus, score a throw-away copy.

    Prints the report (or JSON); 2 for a bad argument, 1 when the system is not running, refuses,
    or the scope holds no active fact to make a query from.
    """
    from echo_memory.libs.local.cli.audit_commands import admin_session
    from echo_memory.libs.local.eval import own_store

    if not 1 <= args.queries <= 10_000:
        return _refuse("eval", f"--queries must be between 1 and 10000, not {args.queries}")

    async def job() -> dict[str, Any]:
        async with admin_session(settings) as read:
            return await own_store.run(read, args.scope, retrieval=settings.retrieval,
                                       timeout=settings.timeouts.bulk, limit=args.queries, seed=args.seed,
                                       context=args.context, sweep=sizes if args.sweep else (), ablate=args.ablate)

    try:
        report = _run_harness(settings, "eval", job())
    except own_store.EmptyStore as exc:
        print(f"echo-memory eval: scope '{args.scope}': {exc}; write some memory first, or pass --scope",
              file=sys.stderr)
        return 1
    if report is None:
        return 1
    print(json.dumps(report, indent=2) if args.json else own_store.render(report))
    return 0


async def _throwaway(settings: Any, job: Any) -> dict[str, Any]:
    """`job(call)` against a throw-away system with the user's retrieval settings; deleted after.

    Harness runs store hundreds of facts or whole conversations: in the user's store they would
    stay for good, and nothing would tell them from real memory.
    """
    from echo_memory.libs.local.eval.system import stack_call, throwaway_stack

    async with throwaway_stack(retrieval=settings.retrieval) as stack:
        report: dict[str, Any] = await job(stack_call(stack))
        return report


def _sizes(text: str) -> list[int] | None:
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        return None
    return sizes if sizes and all(n > 0 for n in sizes) else None


def _refuse(command: str, sentence: str) -> int:
    print(f"echo-memory {command}: {sentence}", file=sys.stderr)
    return USAGE_ERROR


def _dataset_file(command: str, path: str, name: str) -> Path | None:
    """`path`, or `name` inside it when it is a folder; None (after saying why) when neither is a file."""
    candidate = Path(path)
    if candidate.is_dir():
        candidate = candidate / name
    if not candidate.is_file():
        print(f"echo-memory {command}: no dataset file at {candidate} (expected {name})", file=sys.stderr)
        return None
    return candidate


def _run_harness(settings: Any, command: str, job: Any) -> dict[str, Any] | None:
    """The harness' report; None after one line on stderr when the system is not running or refuses."""
    from echo_memory.libs.core.contracts.errors import EchoError

    try:
        report: dict[str, Any] = eventloop.run(job, use_uvloop=settings.uvloop)
        return report
    except EchoError as exc:  # NotRunning and BusUnreachable among them
        print(f"echo-memory {command}: {exc.code}: {exc.message}", file=sys.stderr)
    return None


def _external(settings: Any, args: Any) -> int:
    from echo_memory.libs.local.eval.madial import QUERY_MODES, dataset_files, run_madial
    from echo_memory.libs.local.eval.runner import run_locomo

    command = f"eval-external {args.benchmark}"
    if args.path is None:
        what = {"locomo": f"{LOCOMO_FILE} or the folder holding it",
                "madial": "the folder holding the MADial-Bench-en memory and dialogue files",
                "longmemeval": f"a LongMemEval JSON file such as {LONGMEMEVAL_FILE}",
                "memdaily": "the MemDaily folder holding messages_and_QAs"}[args.benchmark]
        return _refuse(command, f"give the dataset path: echo-memory {command} PATH ({what})")
    if args.benchmark == "longmemeval":
        return _longmemeval(settings, args, command)
    if args.benchmark == "memdaily":
        from echo_memory.libs.local.eval.memdaily import dataset_folder, run_memdaily

        if args.per_type is not None and args.per_type < 1:
            return _refuse(command, f"--per-type must be 1 or more, not {args.per_type}")
        try:
            dataset_folder(args.path)
        except FileNotFoundError as exc:
            return _refuse(command, str(exc))
        job = _throwaway(settings, lambda call: run_memdaily(call, args.path, per_file=args.per_type))
    elif args.benchmark == "madial":
        if args.query_mode not in QUERY_MODES:
            return _refuse(command, f"--query-mode must be one of {', '.join(QUERY_MODES)}")
        try:
            dataset_files(args.path)
        except FileNotFoundError as exc:
            return _refuse(command, str(exc))
        job = _throwaway(settings, lambda call: run_madial(call, args.path, dialogues=args.questions,
                                                          mode=args.query_mode))
    else:
        path = _dataset_file(command, args.path, LOCOMO_FILE)
        if path is None:
            return USAGE_ERROR
        job = _throwaway(settings, lambda call: run_locomo(call, str(path), conversations=args.conversations,
                                                          questions=args.questions, show=True))
    report = _run_harness(settings, command, job)
    if report is None:
        return 1
    _print_external(report, as_json=args.json)
    return 0


def _print_external(report: dict[str, Any], *, as_json: bool) -> None:
    """The report's tables, or with --json the whole report (every question's scores included)."""
    from echo_memory.libs.local.eval.report import render_external

    print(json.dumps(report, indent=2) if as_json else render_external(report))


def _longmemeval(settings: Any, args: Any, command: str) -> int:
    """Load and check the file before connecting; then run and print the report (per question with --json)."""
    from echo_memory.libs.local.eval import longmemeval
    from echo_memory.libs.local.eval.runner import run_longmemeval

    if args.per_type is not None and args.per_type < 1:
        return _refuse(command, f"--per-type must be 1 or more, not {args.per_type}")
    path = _dataset_file(command, args.path, LONGMEMEVAL_FILE)
    if path is None:
        return USAGE_ERROR
    try:
        questions = longmemeval.first_of_each_type(longmemeval.load(path), args.per_type)
    except longmemeval.DatasetError as exc:
        return _refuse(command, str(exc))
    report = _run_harness(settings, command, _throwaway(settings, lambda call: run_longmemeval(call, questions, show=True)))
    if report is None:
        return 1
    _print_external(report, as_json=args.json)
    return 0
