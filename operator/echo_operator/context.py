"""The things every reconciler needs, built once per operator process."""

from __future__ import annotations

import dataclasses

from echo_memory.operator.backend import Backend
from echo_memory.operator.config import OperatorConfig
from echo_memory.operator.kube import Kube


@dataclasses.dataclass(frozen=True)
class Context:
    """API access, the Echo Memory backend and the process settings."""

    kube: Kube
    backend: Backend
    config: OperatorConfig
