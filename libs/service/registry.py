"""Which services exist, which module holds each one's routes, and how `echo-memory service NAME` runs it.

Modules are named here, not imported: this package is shared by every process and must not pull
one service's code into another's.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from libs.config import Settings


@dataclass(frozen=True)
class ServiceInfo:
    name: str
    module: str  # a module with `routes(ctx) -> list[Route]`
    embedder: bool  # loads the embedding model at start


SERVICES: tuple[ServiceInfo, ...] = (
    ServiceInfo("writes", "services.writes.app", True),
    ServiceInfo("retrieval", "services.retrieval.app", True),
    ServiceInfo("causal", "services.causal.app", True),
    ServiceInfo("audit", "services.audit.app", False),
    ServiceInfo("reindex", "services.reindex.app", True),  # re-embeds after a model change
    ServiceInfo("consolidation", "services.consolidation.app", False),
)
EDGE_MODULE = "services.edge.app"
NAMES = tuple(s.name for s in SERVICES) + ("edge",)


def service_info(name: str) -> ServiceInfo:
    """The service called `name`; ValueError naming the choices when there is none."""
    info = next((s for s in SERVICES if s.name == name), None)
    if info is None:
        raise ValueError(f"unknown service {name!r}; choose one of {', '.join(NAMES)}")
    return info


def run(name: str, settings: Settings) -> int:
    """Run service `name` (or the edge) in the foreground; returns its exit code."""
    if name == "edge":
        return int(importlib.import_module(EDGE_MODULE).run_edge(settings))
    info = service_info(name)
    from libs.service.runner import run_service

    module = importlib.import_module(info.module)
    return run_service(name, module.routes, settings, embedder=info.embedder)
