"""``python -m echo_memory.operator``: run the operator with settings from the environment."""

from __future__ import annotations

import logging

import kopf

from echo_memory.operator.config import OperatorConfig
from echo_memory.operator.handlers import build_registry


def main() -> None:
    """Run the operator in the foreground until SIGTERM (one replica, no peering)."""
    config = OperatorConfig.from_env()
    level = logging.getLevelName(config.log_level.upper())
    if not isinstance(level, int):
        raise SystemExit(f"echo-memory operator: unknown log level {config.log_level!r}")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    kopf.run(
        registry=build_registry(config),
        memo=kopf.Memo(config=config),
        standalone=True,
        clusterwide=not config.namespaces,
        namespaces=list(config.namespaces),
        liveness_endpoint=config.liveness_endpoint,
    )


if __name__ == "__main__":
    main()
