"""Which services exist, which module holds each one's routes, and how `echo-memory service NAME` runs it.

Modules are named here, not imported: this package is shared by every process and must not pull
one service's code into another's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from echo_memory.libs.core.config import Settings


@dataclass(frozen=True)
class ServiceInfo:
    name: str
    module: str  # a module with `routes(ctx) -> Routes`
    # When the process loads the embedding model: at start (every request embeds), on first use
    # (a rare verb embeds; the model costs ~170 MB resident), or never.
    model: Literal["at_start", "on_first_use", "never"]

    @property
    def embedder(self) -> bool:
        """The service embeds at all (tests hand it the shared model)."""
        return self.model != "never"


SERVICES: tuple[ServiceInfo, ...] = (
    ServiceInfo("writes", "echo_memory.services.writes.app", "at_start"),
    ServiceInfo("retrieval", "echo_memory.services.retrieval.app", "at_start"),
    ServiceInfo("causal", "echo_memory.services.causal.app", "at_start"),
    ServiceInfo("audit", "echo_memory.services.audit.app", "never"),
    ServiceInfo("reindex", "echo_memory.services.reindex.app", "on_first_use"),  # re-embeds only after a model change
    ServiceInfo("consolidation", "echo_memory.services.consolidation.app", "never"),
)
EDGE_MODULE = "echo_memory.services.edge.app"
# The entry points of the HTTP/stdio processes that the CLI (`mcp`, `bridge`, `dashboard --serve`)
# and the test harness start.
EntryPoint = Literal["serve_stdio", "serve_bridge", "start_edge", "serve_dashboard"]
_ENTRY_POINTS: dict[str, tuple[str, str]] = {
    "serve_stdio": (EDGE_MODULE, "serve_stdio"),
    "start_edge": (EDGE_MODULE, "start_edge"),
    "serve_bridge": ("echo_memory.services.edge.bridge", "serve_bridge"),
    "serve_dashboard": ("echo_memory.services.dashboard.app", "serve"),
}
NAMES = tuple(s.name for s in SERVICES) + ("edge",)


def service_info(name: str) -> ServiceInfo:
    """The service called `name`; ValueError naming the choices when there is none."""
    info = next((s for s in SERVICES if s.name == name), None)
    if info is None:
        raise ValueError(f"unknown service {name!r}; choose one of {', '.join(NAMES)}")
    return info


def entry_point(name: EntryPoint) -> Callable[..., Any]:
    """The edge's or the dashboard's function `name`, imported on call, as `run` imports a service's routes.

    Callers in libs start those processes without importing services at load time, so the layer
    rule holds for every other process that imports them.
    """
    module, attribute = _ENTRY_POINTS[name]
    return getattr(importlib.import_module(module), attribute)  # type: ignore[no-any-return]


def run(names: list[str], settings: Settings) -> int:
    """Run the edge, or the services `names` in this one process, in the foreground; returns the exit code.

    ValueError naming the choices for an unknown name, or when the edge is asked to share a process.
    With `settings.nats_credentials_dir`, each service connects with its own file there.
    """
    if names == ["edge"]:
        return int(importlib.import_module(EDGE_MODULE).run_edge(settings))
    if "edge" in names:
        raise ValueError("the edge runs in a process of its own: `echo-memory service edge`")
    if len(set(names)) != len(names):
        raise ValueError(f"each service once: {' '.join(names)}")
    from echo_memory.libs.server.bus.auth import credentials_path
    from echo_memory.libs.server.service.runner import Hosted, run_services

    hosted = []
    for name in names:
        info = service_info(name)
        own = settings
        if settings.nats_credentials_dir is not None:
            own = settings.model_copy(update={"nats_credentials": credentials_path(settings.nats_credentials_dir, name)})
        hosted.append(Hosted(name, importlib.import_module(info.module).routes, own, info.model))
    return run_services(hosted, settings)


def process_groups(shared: bool) -> dict[str, tuple[str, ...]]:
    """The processes `echo-memory up` starts, each with the services it hosts.

    Shared: every service in one process beside the edge, so the interpreter, the libraries and the
    embedding model are loaded once (the laptop's default: ~0.5 GB less); else one process each.
    """
    if not shared:
        return {name: (name,) for name in NAMES}
    return {"services": tuple(s.name for s in SERVICES), "edge": ("edge",)}
