"""The Echo Memory Kubernetes operator (kopf).

It manages three custom resources of the ``echo-memory.io/v1alpha1`` API:
``MemoryOrg`` (an org's Postgres, its schema migrations and its registration
on the bus), ``MemoryScope`` and ``MemoryAgent``.  Layers, from the bottom:
:mod:`~echo_memory.operator.names` and :mod:`~echo_memory.operator.specs` (pure),
:mod:`~echo_memory.operator.manifests` (pure builders), :mod:`~echo_memory.operator.kube` and
:mod:`~echo_memory.operator.backend` (the two I/O seams), :mod:`~echo_memory.operator.orgs`
and :mod:`~echo_memory.operator.dependents` (reconcilers), and
:mod:`~echo_memory.operator.handlers` (kopf wiring).  Run it with
``python -m echo_memory.operator``.
"""

from echo_memory.operator.backend import Backend, LiveBackend
from echo_memory.operator.config import OperatorConfig
from echo_memory.operator.context import Context
from echo_memory.operator.handlers import build_registry
from echo_memory.operator.kube import Kube, KubeError
from echo_memory.operator.names import API_VERSION, GROUP, VERSION

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "Backend",
    "Context",
    "Kube",
    "KubeError",
    "LiveBackend",
    "OperatorConfig",
    "build_registry",
]
