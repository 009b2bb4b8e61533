"""Which scopes and agents are invented demo data (`echo-memory demo-seed`).

Demo memory lives in a scope named `demo` or `demo-<anything>`, written by agents named `demo-<client>`,
so no figure about the user's own memory (health, status, the dashboard's default view) counts it
unless the caller asks for it.
"""

from __future__ import annotations

DEMO_SCOPE = "demo"
DEMO_PREFIX = "demo-"


def is_demo_scope(name: str) -> bool:
    """True for `demo` and `demo-<anything>`: the names demo-seed fills and health/status leave out."""
    return name == DEMO_SCOPE or name.startswith(DEMO_PREFIX)


def demo_agent(client: str) -> str:
    """The agent id demo data is written under for `client`: `demo-<client>`, never a real agent's name."""
    return f"{DEMO_PREFIX}{client}"


__all__ = ["DEMO_PREFIX", "DEMO_SCOPE", "demo_agent", "is_demo_scope"]
