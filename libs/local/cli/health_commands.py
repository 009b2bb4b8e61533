"""`echo-memory health`: the memory's 0-100 score, what is strong, what is weak and what to do.

The figures come from the audit service's `health` verb (the store's own tables); the JSON shape
is documented in docs/health.md.
"""

from __future__ import annotations

from typing import Any

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.health import HealthInput, HealthResult


def register(sub: Any) -> None:
    health = sub.add_parser("health", help="a 0-100 score of how well the memory is used, with what to fix")
    health.add_argument("--scope", help="one scope (default: every scope)")
    health.add_argument("--days", type=int, default=7, help="how far back read figures look (default 7)")
    health.add_argument("--include-demo", action="store_true",
                        help="also count demo-seed's scopes (demo, demo-*), left out by default")
    health.add_argument("--json", action="store_true", help="print the result as JSON (docs/health.md)")
    health.set_defaults(func=_health)


def _health(settings: Settings, args: Any) -> int:
    """Print the report (or its JSON); exit 0 whatever the score, 1 when the system cannot answer."""
    from echo_memory.libs.core.contracts.verbs import HEALTH
    from echo_memory.libs.local.connection import admin_command

    request = HealthInput(window_days=args.days, include_demo=args.include_demo, scope=args.scope or None)
    result = admin_command(settings, HEALTH, request, "health")
    if result is None:
        return 1
    print(result.model_dump_json(indent=2) if args.json else render(result))
    return 0


def render(result: HealthResult) -> str:
    """The report a person reads: the score, then the weak checks with their actions, then the strong."""
    by_name = {c.name: c for c in result.checks}
    scopes = ", ".join(result.figures.scopes) or "none"
    lines = [f"health: {result.score}/100  (scopes: {scopes}; reads over {result.figures.window_days} days)", ""]
    if result.weak:
        lines.append("weak:")
        for name in result.weak:
            check = by_name[name]
            lines.append(f"  {name:<16} {check.points:>5g}/{check.weight:<3} {check.detail}")
            if check.action:
                lines.append(f"  {'':<16} -> {check.action}")
    if result.strong:
        lines.append("strong:")
        for name in result.strong:
            check = by_name[name]
            lines.append(f"  {name:<16} {check.points:>5g}/{check.weight:<3} {check.detail}")
    writers = result.figures.writers
    if writers:
        lines += ["", "writers:"]
        lines += [f"  {w.agent_id:<20} {w.facts:>7} facts, last {w.last_write:%Y-%m-%d %H:%M:%S} UTC" for w in writers]
    return "\n".join(lines)


__all__ = ["register", "render"]
