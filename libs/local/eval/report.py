"""Plain-text tables of `echo-memory eval` and `eval-external` reports (the JSON is printed with --json)."""

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


def render_external(report: dict[str, Any]) -> str:
    """An `eval-external` report as tables: one row per group (overall, per category or type, the BM25
    baseline beside the system), each metric a column, the 95% intervals under the rows that have them,
    then the paired leads over BM25 and the latency. `--json` prints the whole report instead."""
    rows: list[tuple[str, dict[str, Any]]] = []
    leads: list[tuple[str, dict[str, Any]]] = []
    _collect(report, [], rows, leads)
    scalars = [f"{key} {value}" for key, value in report.items()
               if key != "dataset" and isinstance(value, int | str) and not isinstance(value, bool)]
    lines = [f"{report.get('dataset', 'benchmark')}: {', '.join(scalars)}"]
    metrics = list(dict.fromkeys(key for _, row in rows for key, value in row.items()
                                 if key != "n" and not key.endswith("_ci95") and isinstance(value, int | float)))
    if rows:
        table: list[tuple[str, list[str]]] = [("", [*metrics, "n"])]
        for label, row in rows:
            table.append((label, [_figure(row.get(m)) for m in metrics] + [str(row.get("n", ""))]))
            if any(f"{m}_ci95" in row for m in metrics):
                table.append(("  95% CI", [_interval(row.get(f"{m}_ci95")) for m in metrics] + [""]))
        width = max(len(label) for label, _ in table) + 2
        columns = [max(len(cells[i]) for _, cells in table) + 2 for i in range(len(metrics) + 1)]
        lines.append("")
        lines += [(f"{label:<{width}}" + "".join(f"{cell:>{columns[i]}}" for i, cell in enumerate(cells))).rstrip()
                  for label, cells in table]
    if leads:
        lines += ["", "lead over BM25 (mean paired difference, system minus BM25, with its 95% interval):"]
        lines += [f"  {label:<16} {lead['mean']:+.4f}  (95% CI {_interval(lead.get('ci95'))})" for label, lead in leads]
    latency = report.get("latency_ms")
    if isinstance(latency, dict) and "p50" in latency:
        lines += ["", f"query latency over the bus: p50 {latency['p50']} ms, p95 {latency['p95']} ms"]
    lines += ["", "(--json prints the whole report, every question's scores included)"]
    return "\n".join(lines)


def _collect(node: dict[str, Any], path: list[str], rows: list[tuple[str, dict[str, Any]]],
             leads: list[tuple[str, dict[str, Any]]]) -> None:
    """Every summary (a dict with `n`) and every lead (`mean` and `ci95`) below `node`, labelled by path."""
    for key, value in node.items():
        if key in ("per_question", "latency_ms") or not isinstance(value, dict):
            continue
        # "by_category" and "by_type" only group; the group's own name labels the row.
        label = [*path, key] if not key.startswith("by_") else path
        if "n" in value:
            rows.append((" ".join(label), value))
        elif set(value) == {"mean", "ci95"}:
            leads.append((" ".join(p.removeprefix("lead_") for p in label if p != "lead_over_bm25"), value))
        else:
            _collect(value, label, rows, leads)


def _figure(value: Any) -> str:
    if not isinstance(value, int | float):
        return ""
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.4f}"


def _interval(pair: list[float] | None) -> str:
    """A 95% interval, two decimals (none past 10): narrow enough to sit under its column."""
    if not pair:
        return ""
    return "..".join(f"{v:.0f}" if abs(v) >= 10 else f"{v:.2f}" for v in pair)
