"""Recall and false positives of the secret filter on the labelled corpus, per kind.

`python -m tests.secrets.report` prints the table docs/security.md quotes (markdown); `--seed N`
measures a corpus generated from another seed. Exit code 1 when the bar is not met.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import dataclass

from echo_memory.libs.core.secrets import find_secret
from tests.secrets.corpus import SEED, Sample, build, password
from tests.secrets.heldout import ORDINARY, SECRET_PHRASINGS

MIN_RECALL = 0.98
MIN_KIND_RECALL = 0.9
MAX_FALSE_POSITIVES = 0.01


@dataclass(frozen=True)
class Row:
    """One kind: how many samples, how many the filter flagged, and the texts it got wrong."""

    kind: str
    secret: bool
    total: int
    flagged: int
    wrong: tuple[str, ...]

    @property
    def rate(self) -> float:
        """Recall for a kind of secret, false-positive rate for a kind of look-alike."""
        return self.flagged / self.total


@dataclass(frozen=True)
class Report:
    """Per-kind rows and the totals the bar is stated on."""

    secrets: list[Row]
    lookalikes: list[Row]

    @property
    def recall(self) -> float:
        return sum(r.flagged for r in self.secrets) / sum(r.total for r in self.secrets)

    @property
    def false_positives(self) -> float:
        return sum(r.flagged for r in self.lookalikes) / sum(r.total for r in self.lookalikes)

    def failures(self) -> list[str]:
        """Each way the report misses the bar; empty when it meets it."""
        out = []
        if self.recall < MIN_RECALL:
            out.append(f"recall {self.recall:.3f} < {MIN_RECALL}")
        if self.false_positives > MAX_FALSE_POSITIVES:
            out.append(f"false positives {self.false_positives:.3f} > {MAX_FALSE_POSITIVES}")
        out += [f"{r.kind}: recall {r.rate:.2f} < {MIN_KIND_RECALL}" for r in self.secrets if r.rate < MIN_KIND_RECALL]
        return out


def _rows(samples: list[Sample], *, secret: bool) -> list[Row]:
    by_kind: dict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        by_kind[sample.kind].append(sample)
    rows = []
    for kind, group in by_kind.items():
        flagged = [s for s in group if find_secret(s.text) is not None]
        wrong = [s.text for s in group if (find_secret(s.text) is None) == secret]
        rows.append(Row(kind, secret, len(group), len(flagged), tuple(wrong)))
    return rows


def measure(seed: int = SEED) -> Report:
    """Run the filter over the corpus generated from `seed`."""
    secrets, lookalikes = build(seed)
    return Report(_rows(secrets, secret=True), _rows(lookalikes, secret=False))


def held_out(seed: int = SEED) -> tuple[list[str], list[str]]:
    """(phrasings missed, ordinary sentences flagged) on the held-out set, values from `seed`."""
    build(seed)  # the password generator draws from the corpus's seeded RNG
    missed = [p for p in SECRET_PHRASINGS if find_secret(p.format(p=password())) is None]
    flagged = [s for s in ORDINARY if find_secret(s) is not None]
    build(SEED)
    return missed, flagged


def table(report: Report) -> str:
    """The report as two markdown tables and a totals line."""
    lines = ["| kind of secret | samples | caught | recall |", "|---|---:|---:|---:|"]
    lines += [f"| {r.kind} | {r.total} | {r.flagged} | {r.rate:.2f} |" for r in report.secrets]
    lines += ["", "| kind of look-alike | samples | flagged | false positives |", "|---|---:|---:|---:|"]
    lines += [f"| {r.kind} | {r.total} | {r.flagged} | {r.rate:.3f} |" for r in report.lookalikes]
    total_s = sum(r.total for r in report.secrets)
    total_l = sum(r.total for r in report.lookalikes)
    lines += ["", f"recall {report.recall:.3f} on {total_s} secrets in {len(report.secrets)} kinds; "
              f"false positives {report.false_positives:.3f} on {total_l} look-alikes"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    report = measure(args.seed)
    print(table(report))
    missed, flagged = held_out(args.seed)
    print(f"held-out phrasings (tests/secrets/heldout.py): {len(SECRET_PHRASINGS) - len(missed)} of "
          f"{len(SECRET_PHRASINGS)} caught, {len(flagged)} of {len(ORDINARY)} ordinary sentences flagged")
    for text in missed + flagged:
        print(("missed" if text in missed else "flagged") + f" [held-out]: {text!r}")
    for failure in report.failures():
        print("below the bar:", failure)
    for row in report.secrets + report.lookalikes:
        for text in row.wrong:
            print(("missed" if row.secret else "flagged") + f" [{row.kind}]: {text!r}")
    return 1 if report.failures() else 0


if __name__ == "__main__":
    raise SystemExit(main())
