"""The Echo Memory Kubernetes operator (kopf).

It manages three custom resources of the ``echo-memory.io/v1alpha1`` API:
``MemoryOrg`` (an org's Postgres, its schema migrations and its registration
on the bus), ``MemoryScope`` and ``MemoryAgent``.  Layers, from the bottom:
:mod:`~echo_operator.names` and :mod:`~echo_operator.specs` (pure),
:mod:`~echo_operator.manifests` (pure builders), :mod:`~echo_operator.kube` and
:mod:`~echo_operator.backend` (the two I/O seams), :mod:`~echo_operator.orgs`
and :mod:`~echo_operator.dependents` (reconcilers), and
:mod:`~echo_operator.handlers` (kopf wiring).  Run it with
``python -m echo_operator``.
"""

from echo_operator.backend import Backend, LiveBackend
from echo_operator.config import OperatorConfig
from echo_operator.context import Context
from echo_operator.handlers import build_registry
from echo_operator.kube import Kube, KubeError
from echo_operator.names import API_VERSION, GROUP, VERSION

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
