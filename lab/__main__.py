"""`python -m lab EXPERIMENT …`: the research experiments, each on a throw-away system.

Dataset paths are arguments; without one, the file is looked for in the datasets folder
(lab/datasets.py: `$ECHO_DATASETS_DIR`, else `../shared/datasets` beside the repository). A
missing file or a bad argument ends with one line on stderr and exit code 2, before anything
starts. Every experiment prints its report as JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from echo_memory.libs.server import eventloop
from lab import datasets
from lab.datasets import DatasetMissing

USAGE_ERROR = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="experiment", required=True)

    sweep = sub.add_parser("sweep", help="agent-facts quality with the store padded by synthetic distractor facts")
    sweep.add_argument("--dataset", help="agent-facts.json (default: agent-facts/ in the datasets folder)")
    sweep.add_argument("--sizes", default="1000,10000", help="store sizes in facts, comma-separated")

    ablate = sub.add_parser("ablate", help="each retrieval channel switched off in turn, with bootstrap intervals")
    ablate.add_argument("--dataset", help="agent-facts.json (default: agent-facts/ in the datasets folder)")
    ablate.add_argument("--locomo", type=int, default=0, metavar="N", help="also the first N LoCoMo conversations")
    ablate.add_argument("--locomo-path", help="locomo10.json (default: locomo/ in the datasets folder)")

    mixed = sub.add_parser("mixed", help="agent-facts and the first N LoCoMo conversations' turns in one scope")
    mixed.add_argument("conversations", type=int, metavar="N")
    mixed.add_argument("--dataset", help="agent-facts.json (default: agent-facts/ in the datasets folder)")
    mixed.add_argument("--locomo-path", help="locomo10.json (default: locomo/ in the datasets folder)")

    grid = sub.add_parser("fusion-grid", help="LoCoMo re-ranked under every fusion weighting of SPEC at once")
    grid.add_argument("spec", help='weights and values to try, e.g. "neighbour=0.15,0.225 reply=0.4,0.6"')
    grid.add_argument("--locomo-path", help="locomo10.json (default: locomo/ in the datasets folder)")
    grid.add_argument("--conversations", type=int, help="only the first N conversations")
    grid.add_argument("--questions", type=int, help="only the first N questions of each")

    shape = sub.add_parser("chat-shape", help="LoCoMo as written and split into chat-like messages, per fusion weighting")
    shape.add_argument("spec", nargs="?", default="",
                       help='weights and values to try, as for fusion-grid (default: the service\'s alone)')
    shape.add_argument("--locomo-path", help="locomo10.json (default: locomo/ in the datasets folder)")
    shape.add_argument("--conversations", type=int, help="only the first N conversations")
    shape.add_argument("--questions", type=int, help="only the first N questions of each")

    month = sub.add_parser("named-month", help="LoCoMo with a bonus for turns dated in the month a question names")
    month.add_argument("--bonuses", default="0,0.1,0.2,0.3", help="bonuses to try, comma-separated (0: as shipped)")
    month.add_argument("--locomo-path", help="locomo10.json (default: locomo/ in the datasets folder)")
    month.add_argument("--conversations", type=int, help="only the first N conversations")

    paired = sub.add_parser("paired", help="two eval-external --json reports compared question by question")
    paired.add_argument("base", help="the report to compare against")
    paired.add_argument("other", help="the report of the change")

    gates = sub.add_parser("gates", help="quality gates on against off on every dataset, with what they cost and save")
    gates.add_argument("--locomo", type=int, default=3, metavar="N", help="the first N LoCoMo conversations (default 3)")
    gates.add_argument("--madial", type=int, metavar="N", help="only the first N MADial-Bench dialogues (default all)")
    gates.add_argument("--memdaily-per-type", type=int, default=10, metavar="N",
                       help="the first N trajectories of each MemDaily file (default 10)")
    return parser


def _numbers(text: str, flag: str, *, least: float, rule: str) -> list[float]:
    """The comma-separated numbers of `flag`, each at least `least`; ValueError with `rule` otherwise."""
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or any(value < least for value in values):
        raise ValueError(f"{flag} takes {rule}")
    return values


def _sizes(text: str) -> list[int]:
    values = _numbers(text, "--sizes", least=1, rule="positive integers, e.g. 1000,10000")
    if any(value != int(value) for value in values):
        raise ValueError("--sizes takes positive integers, e.g. 1000,10000")
    return [int(value) for value in values]


def _bonuses(text: str) -> list[float]:
    return _numbers(text, "--bonuses", least=0, rule="numbers of 0 or more, e.g. 0,0.1,0.3")


def _plan(args: argparse.Namespace) -> Any:
    """The experiment's coroutine, with every path and argument checked first.

    Raises DatasetMissing or ValueError (with the sentence to print) before anything starts.
    """
    from lab import experiments

    if args.experiment == "sweep":
        return experiments.sweep_on_throwaway(datasets.dataset(datasets.AGENT_FACTS, args.dataset), _sizes(args.sizes))
    if args.experiment == "ablate":
        if args.locomo < 0:
            raise ValueError("--locomo takes a number of conversations (0 or more)")
        facts = datasets.dataset(datasets.AGENT_FACTS, args.dataset)
        locomo = datasets.dataset(datasets.LOCOMO, args.locomo_path) if args.locomo else None
        return experiments.ablation_on_throwaway(facts, locomo=locomo, conversations=args.locomo)
    if args.experiment == "mixed":
        if args.conversations < 1:
            raise ValueError("mixed takes a number of LoCoMo conversations (1 or more)")
        facts = datasets.dataset(datasets.AGENT_FACTS, args.dataset)
        return experiments.mixed_on_throwaway(facts, datasets.dataset(datasets.LOCOMO, args.locomo_path),
                                              args.conversations)
    if args.experiment == "gates":
        from lab import gates

        if args.locomo < 1 or args.memdaily_per_type < 1 or (args.madial is not None and args.madial < 1):
            raise ValueError("--locomo, --madial and --memdaily-per-type take positive numbers")
        return gates.run(datasets.dataset(datasets.AGENT_FACTS), datasets.dataset(datasets.LOCOMO),
                         datasets.dataset(datasets.MADIAL), datasets.dataset(datasets.MEMDAILY),
                         conversations=args.locomo, per_type=args.memdaily_per_type, dialogues=args.madial)
    if args.experiment == "named-month":
        from lab import named_month

        bonuses = _bonuses(args.bonuses)  # a bad list stops here, before the dataset is looked for
        return named_month.run(datasets.dataset(datasets.LOCOMO, args.locomo_path), bonuses,
                               conversations=args.conversations)
    if args.experiment == "chat-shape":
        from echo_memory.libs.core.config.retrieval import RetrievalSettings
        from lab import chat_shape
        from lab.fusion_grid import parse_grid

        retrieval = RetrievalSettings()
        grid = parse_grid(args.spec, retrieval.fusion)  # a bad spec stops here, before anything starts
        return chat_shape.run(datasets.dataset(datasets.LOCOMO, args.locomo_path), grid, retrieval,
                              conversations=args.conversations, questions=args.questions)
    from echo_memory.libs.core.config.retrieval import RetrievalSettings
    from lab import fusion_grid

    retrieval = RetrievalSettings()
    grid = fusion_grid.parse_grid(args.spec, retrieval.fusion)
    path = datasets.dataset(datasets.LOCOMO, args.locomo_path)
    return fusion_grid.run(path, grid, retrieval, conversations=args.conversations, questions=args.questions)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one experiment and print its JSON report; 0 when it ran, 2 for a bad argument or a
    missing dataset (one line on stderr, nothing started)."""
    args = _parser().parse_args(argv)
    if args.experiment == "paired":  # reads two reports; nothing to start
        from lab.paired import compare

        try:
            print(json.dumps(compare(Path(args.base), Path(args.other)), indent=2))
        except (OSError, ValueError) as exc:
            print(f"python -m lab paired: {exc}", file=sys.stderr)
            return USAGE_ERROR
        return 0
    try:
        job = _plan(args)
    except (DatasetMissing, ValueError) as exc:
        print(f"python -m lab {args.experiment}: {exc}", file=sys.stderr)
        return USAGE_ERROR
    print(json.dumps(eventloop.run(job), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
