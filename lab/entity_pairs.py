"""`python -m lab.entity_pairs [--part dev|holdout|all] [--misses]`: entity resolution on the labelled pairs.

Scores every pair of the shipped labelled set (services/writes/entity_pairs.tsv) with the
resolver's rules and the real embedding model, and prints one JSON report per part: AUC of the
resolution score with a bootstrap 95% interval, the share of variants merged or deferred, the
share of look-alikes merged or deferred, deferral precision and recall at the shipped thresholds,
and, beside them, the AUC of the bare cosine and what the old cosine-only rule (defer at 0.81)
did. `--misses` also lists every pair the thresholds get wrong.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from echo_memory.libs.server.embed import MiniLM
from echo_memory.services.writes import resolution_eval as ev
from echo_memory.services.writes.entities import DEFER_AT, MERGE_AT

OLD_COSINE_THRESHOLD = 0.81


def run(parts: Sequence[str], misses: bool) -> dict[str, object]:
    model = MiniLM()
    pairs = ev.load_pairs()
    out: dict[str, object] = {"defer_at": DEFER_AT, "merge_at": MERGE_AT}
    for part in parts:
        chosen = [p for p in pairs if part == "all" or p.part == part]
        cosines = ev.cosine_of(model.embed([p.a for p in chosen]), model.embed([p.b for p in chosen]))
        scored = ev.score_pairs(chosen, cosines)
        figures = ev.report(scored, defer_at=DEFER_AT, merge_at=MERGE_AT).as_dict()
        labels = [p.same for p in chosen]
        old = ev.report([ev.Scored(y, c, "cosine") for y, c in zip(labels, cosines, strict=True)],
                        defer_at=OLD_COSINE_THRESHOLD, merge_at=2.0)
        figures["cosine_only"] = {"auc": round(old.auc, 4), "variants_caught": round(old.variants_caught, 4),
                                  "lookalikes_caught": round(old.lookalikes_caught, 4)}
        if misses:
            figures["misses"] = [
                {"a": p.a, "b": p.b, "label": "same" if p.same else "distinct", "rule": s.rule, "score": s.score}
                for p, s in zip(chosen, scored, strict=True) if (s.score >= DEFER_AT) != p.same
            ]
        out[part] = figures
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.entity_pairs", description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["dev", "holdout", "all", "each"], default="each")
    parser.add_argument("--misses", action="store_true", help="list the pairs the thresholds get wrong")
    args = parser.parse_args(argv)
    parts = ["dev", "holdout", "all"] if args.part == "each" else [args.part]
    print(json.dumps(run(parts, args.misses), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
