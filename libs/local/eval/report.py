"""Plain-text tables of `echo-memory eval` reports (the JSON is printed with --json)."""

from __future__ import annotations

from typing import Any

METRICS = ("hit1", "hit10", "mrr", "mrr10")


def render_eval(report: dict[str, Any]) -> str:
    """Overall and per-kind scores, latency, and the context cost when it was measured."""
    overall = report["overall"]
    lines = [f"agent-facts: {report['queries']} queries, ranking depth {report['ranking_depth']}", ""]
    lines.append(f"{'':<14}" + "".join(f"{m:>10}" for m in METRICS) + f"{'n':>6}")
    lines.append(f"{'overall':<14}" + "".join(f"{overall[m]:>10.4f}" for m in METRICS) + f"{overall['n']:>6}")
    lines.append(f"{'  95% CI':<14}" + "".join(f"{_ci(overall.get(m + '_ci95')):>10}" for m in METRICS))
    for kind, row in report["by_kind"].items():
        lines.append(f"{kind:<14}" + "".join(f"{row[m]:>10.4f}" for m in METRICS) + f"{row['n']:>6}")
    latency = report["latency_ms"]
    lines += ["", f"query latency over the bus: p50 {latency['p50']} ms, p95 {latency['p95']} ms (n={latency['n']})"]
    context = report.get("context")
    if context:
        lines.append(
            f"context: {context['tokens_per_recall_mean']:.1f} tokens per top-10 recall vs "
            f"{context['full_notes_dump_tokens']} for every fact as one notes file "
            f"({context['ratio']:.1%}; {1 - context['ratio']:.1%} saved), hit@10 {context['hit10']:.3f}"
        )
    return "\n".join(lines)


def render_sweep(report: dict[str, Any]) -> str:
    """The token curve: one line per store size."""
    head = f"{'facts':>7}{'queries':>9}{'tokens/recall':>15}{'full dump':>11}{'saved':>9}{'hit@10':>8}"
    lines = ["agent-facts: tokens per top-10 recall against a full dump, by store size", "", head]
    for row in report["sweep"]:
        if row["tokens_per_recall_mean"] is None:
            lines.append(f"{row['facts']:>7}{row['queries']:>9}   no query has all its facts at this size")
            continue
        lines.append(
            f"{row['facts']:>7}{row['queries']:>9}{row['tokens_per_recall_mean']:>15.1f}"
            f"{row['full_notes_dump_tokens']:>11}{row['saving']:>9.1%}{row['hit10']:>8.3f}"
        )
    return "\n".join(lines)


def _ci(pair: list[float] | None) -> str:
    return f"{pair[0]:.2f}-{pair[1]:.2f}" if pair else ""
