"""Process settings of the operator, read once from the environment.

Only deployment facts come from the environment (the image to run migrations
with, the NATS URL, the resync period); everything about an org comes from
its custom resource.  ``__main__`` builds one :class:`OperatorConfig` and
hands it to :func:`echo_operator.handlers.build_registry` and to kopf's memo.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

ENV_PREFIX = "ECHO_OPERATOR_"


@dataclasses.dataclass(frozen=True)
class OperatorConfig:
    """Settings of one operator process."""

    #: Image that runs ``echo-memory init-db`` in migration Jobs (the services' image).
    image: str = "ghcr.io/echo-memory/echo-memory:latest"
    #: Pull policy of the migration Job's container.
    image_pull_policy: str = "IfNotPresent"
    #: NATS URL (with token) used to register orgs in the ``echo-orgs`` KV bucket.
    nats_url: str = "nats://127.0.0.1:4222"
    #: Seconds between two drift checks of one object (the kopf timer interval).
    resync_seconds: float = 30.0
    #: Postgres image with pgvector for the StatefulSet provider.
    postgres_image: str = "pgvector/pgvector:pg17"
    #: Postgres image for CloudNativePG Clusters when the org does not name one (pgvector + AGE).
    cnpg_image: str = "ghcr.io/echo-memory/postgres:17"
    #: Schema version the migration Job brings a database to; ``None`` asks the code.
    schema_version: int | None = None
    #: Address of kopf's liveness endpoint (``None`` disables it).
    liveness_endpoint: str | None = "http://0.0.0.0:8080/healthz"
    #: Namespaces to watch; empty means the whole cluster.
    namespaces: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OperatorConfig:
        """Build the settings from ``ECHO_OPERATOR_*`` (and ``ECHO_MEMORY_NATS_URL``) variables.

        Unset variables keep the defaults above.  ``ECHO_OPERATOR_NAMESPACES``
        is a comma-separated list; ``ECHO_OPERATOR_LIVENESS=""`` disables the probe.
        """
        env = os.environ if environ is None else environ
        kwargs: dict[str, object] = {}
        text_fields = {
            "IMAGE": "image",
            "IMAGE_PULL_POLICY": "image_pull_policy",
            "POSTGRES_IMAGE": "postgres_image",
            "CNPG_IMAGE": "cnpg_image",
        }
        for suffix, field in text_fields.items():
            if env.get(ENV_PREFIX + suffix):
                kwargs[field] = env[ENV_PREFIX + suffix]
        nats_url = env.get("ECHO_MEMORY_NATS_URL") or env.get(ENV_PREFIX + "NATS_URL")
        if nats_url:
            kwargs["nats_url"] = nats_url
        if env.get(ENV_PREFIX + "RESYNC_SECONDS"):
            kwargs["resync_seconds"] = float(env[ENV_PREFIX + "RESYNC_SECONDS"])
        if env.get(ENV_PREFIX + "SCHEMA_VERSION"):
            kwargs["schema_version"] = int(env[ENV_PREFIX + "SCHEMA_VERSION"])
        if ENV_PREFIX + "LIVENESS" in env:
            kwargs["liveness_endpoint"] = env[ENV_PREFIX + "LIVENESS"] or None
        if env.get(ENV_PREFIX + "NAMESPACES"):
            names = (n.strip() for n in env[ENV_PREFIX + "NAMESPACES"].split(","))
            kwargs["namespaces"] = tuple(n for n in names if n)
        return cls(**kwargs)  # type: ignore[arg-type]

    def target_schema_version(self) -> int:
        """The schema version migration Jobs apply: the configured one, else the code's."""
        if self.schema_version is not None:
            return self.schema_version
        from libs.store.migrations import CODE_SCHEMA_VERSION  # the services' own code

        return int(CODE_SCHEMA_VERSION)
