"""Which services exist and how each is started (`echo-memory service NAME`)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from libs.config import Settings


@dataclass(frozen=True)
class ServiceInfo:
    name: str
    module: str  # module with build_router(ctx)
    embedder: bool  # loads the embedding model at start


SERVICES: tuple[ServiceInfo, ...] = (
    ServiceInfo("writes", "services.writes.app", True),
    ServiceInfo("retrieval", "services.retrieval.app", True),
    ServiceInfo("causal", "services.causal.app", True),
    ServiceInfo("audit", "services.audit.app", False),
    ServiceInfo("reindex", "services.reindex.app", True),  # re-embeds after a model change (issue 4)
    ServiceInfo("consolidation", "services.consolidation.app", False),
)
NAMES = tuple(s.name for s in SERVICES) + ("edge",)


def run(name: str, settings: Settings) -> int:
    """Run service `name` in the foreground; returns its exit code."""
    if name == "edge":
        from services.edge.app import run_edge

        return run_edge(settings)
    info = next((s for s in SERVICES if s.name == name), None)
    if info is None:
        raise ValueError(f"unknown service {name!r}; choose one of {', '.join(NAMES)}")
    from libs.bus.service import run_service

    module = importlib.import_module(info.module)
    return run_service(name, module.build_router, settings, embedder=info.embedder)
