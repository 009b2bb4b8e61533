"""A few counters the edge exposes at /metrics in the Prometheus text format.

Deliberately tiny (no client library): tool calls by tool and outcome, and call latency sums.
Traces (OpenTelemetry) carry the detail; these are for dashboards and alerts.
"""

from __future__ import annotations

from collections import Counter, defaultdict


class EdgeMetrics:
    """Counters kept in memory for the life of the edge process."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def record(self, tool: str, outcome: str, seconds: float) -> None:
        """Count one tool call; `outcome` is `ok` or the error code (`rate_limited`, `scope_denied`, …)."""
        self.calls[(tool, outcome)] += 1
        self.seconds[tool] += seconds

    def render(self) -> str:
        """The Prometheus exposition text (empty families are still declared)."""
        lines = [
            "# HELP echo_edge_tool_calls_total MCP tool calls by tool and outcome.",
            "# TYPE echo_edge_tool_calls_total counter",
        ]
        for (tool, outcome), count in sorted(self.calls.items()):
            lines.append(f'echo_edge_tool_calls_total{{tool="{tool}",outcome="{outcome}"}} {count}')
        lines += [
            "# HELP echo_edge_tool_seconds_total Time spent in MCP tool calls, by tool.",
            "# TYPE echo_edge_tool_seconds_total counter",
        ]
        for tool, seconds in sorted(self.seconds.items()):
            lines.append(f'echo_edge_tool_seconds_total{{tool="{tool}"}} {seconds:.6f}')
        return "\n".join(lines) + "\n"


__all__ = ["EdgeMetrics"]
