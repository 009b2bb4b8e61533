"""`echo-memory calibrate [--apply] [--json]`: is entity resolution trustworthy on this store?

Asks the writes service (verb `calibrate`, as the org's admin) to score the store's own
resolution decisions and the shipped labelled pairs, and prints AUC with its bootstrap 95%
interval, deferral precision and recall, and the thresholds in force and proposed. Every run is
recorded (table resolution_calibration) for `health`; `--apply` makes the proposed thresholds
govern writes, and only when the interval excludes chance.
"""

from __future__ import annotations

import argparse
from typing import Any

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.calibration import CalibrateInput, CalibrationFigures
from echo_memory.libs.core.contracts.verbs import CALIBRATE
from echo_memory.libs.local.cli.output import print_json
from echo_memory.libs.local.connection import admin_command


def register(sub: Any) -> None:
    parser = sub.add_parser("calibrate", help="entity-resolution AUC with a 95%% interval and deferral precision")
    parser.add_argument("--apply", action="store_true",
                        help="use the proposed thresholds for writes (only when the interval excludes chance)")
    parser.add_argument("--rounds", type=int, default=1000, help="bootstrap resamples (100-10000)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=calibrate)


def calibrate(settings: Settings, args: argparse.Namespace) -> int:
    """Prints the figures and exits 0; 1 with one line on stderr when the system is down or refuses."""
    result = admin_command(settings, CALIBRATE, CalibrateInput(apply=args.apply, rounds=args.rounds), "calibrate")
    if result is None:
        return 1
    if args.json:
        print_json(result)
        return 0
    print(result.message)
    sources = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in result.store_sources.items())
    print(f"store decisions: {result.store_pairs} pairs ({sources})")
    rows = [("store", result.store), ("store + shipped set", result.combined)]
    print(f"{'set':<20} {'pairs':>6} {'AUC':>6} {'95% CI':>15} {'precision':>10} {'recall':>7} {'look-alikes':>12}")
    for label, figures in rows:
        print(_row(label, figures))
    print(f"thresholds: defer at {result.defer_at} (proposed {result.proposed_defer_at}), "
          f"merge at {result.merge_at} (proposed {result.proposed_merge_at}); "
          f"{'applied' if result.applied else 'not applied'} (run {result.calibration_id})")
    return 0


def _row(label: str, f: CalibrationFigures | None) -> str:
    if f is None:
        return f"{label:<20} {'0':>6} {'—':>6} {'—':>15} {'—':>10} {'—':>7} {'—':>12}"
    ci = f"{f.auc_ci95[0]:.3f}–{f.auc_ci95[1]:.3f}"
    return (f"{label:<20} {f.pairs:>6} {f.auc:>6.3f} {ci:>15} {f.deferral_precision:>10.3f} "
            f"{f.deferral_recall:>7.3f} {f.lookalikes_caught:>12.3f}")
