"""Process settings of the operator, read once from the environment.

Read with pydantic-settings like every other process. Only deployment facts
come from the environment (the image to run migrations with, the NATS URL,
the resync period); everything about an org comes from its custom resource.  ``__main__`` builds one :class:`OperatorConfig` and
hands it to :func:`echo_memory.operator.handlers.build_registry` and to kopf's memo.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

ENV_PREFIX = "ECHO_OPERATOR_"


class OperatorConfig(BaseSettings):
    """Settings of one operator process (``ECHO_OPERATOR_*``; the NATS URL also as ``ECHO_MEMORY_NATS_URL``)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True, populate_by_name=True)

    image: str = Field("ghcr.io/echo-memory/echo-memory:latest",
                       description="image that runs `echo-memory init-db` in migration Jobs (the services' image)")
    image_pull_policy: str = Field("IfNotPresent", description="pull policy of the migration Job's container")
    nats_url: str = Field(
        "nats://127.0.0.1:4222",
        validation_alias=AliasChoices("ECHO_MEMORY_NATS_URL", "ECHO_OPERATOR_NATS_URL", "nats_url"),
        description="NATS URL (with token) used to register orgs in the `echo-orgs` KV bucket",
    )
    resync_seconds: float = Field(30.0, gt=0, description="seconds between two drift checks of one object")
    postgres_image: str = Field("pgvector/pgvector:pg17", description="Postgres image with pgvector (StatefulSet)")
    cnpg_image: str = Field("ghcr.io/echo-memory/postgres:17",
                            description="Postgres image for CloudNativePG Clusters (pgvector + AGE)")
    schema_version: int | None = Field(None, description="schema version migration Jobs apply; unset: the code's")
    liveness_endpoint: str | None = Field(
        "http://0.0.0.0:8080/healthz",
        validation_alias=AliasChoices("ECHO_OPERATOR_LIVENESS", "liveness_endpoint"),
        description="kopf's liveness endpoint; an empty ECHO_OPERATOR_LIVENESS disables it",
    )
    log_level: str = Field(
        "INFO", validation_alias=AliasChoices("ECHO_MEMORY_LOG_LEVEL", "ECHO_OPERATOR_LOG_LEVEL", "log_level"),
        description="log level of the operator and kopf (the chart's logLevel)")
    bus_timeout_seconds: float = Field(5.0, gt=0, description="bound on every NATS call of a reconcile")
    credentials_secret: str | None = Field(
        None, description="Secret (in credentials_namespace) the services mount; org passwords are kept there "
                          "and the registry names the key, never the password. Unset: the URL is registered as is")
    credentials_namespace: str | None = Field(
        None, validation_alias=AliasChoices("ECHO_OPERATOR_CREDENTIALS_NAMESPACE", "POD_NAMESPACE",
                                            "credentials_namespace"),
        description="namespace of credentials_secret (the operator's own, from the downward API)")
    pod_settings_json: Annotated[dict[str, Any], NoDecode] = Field(
        default_factory=dict, validation_alias=AliasChoices("ECHO_OPERATOR_POD_SETTINGS", "pod_settings_json"),
        description="JSON scheduling and image settings for the pods the operator makes (manifests.pods)")
    namespaces: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="comma-separated namespaces to watch; empty means the whole cluster"
    )

    @field_validator("namespaces", mode="before")
    @classmethod
    def _split_namespaces(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @field_validator("pod_settings_json", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else {}
        return value

    @field_validator("liveness_endpoint", "schema_version", "credentials_secret", "credentials_namespace",
                     mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if value == "" else value

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OperatorConfig:
        """The settings from the process environment; values in `environ`, when given (a rendered chart), win.

        Unset variables keep the defaults; raises pydantic's ValidationError naming a bad value.
        """
        if environ is None:
            return cls()
        values: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            alias = field.validation_alias
            keys = alias.choices[:-1] if isinstance(alias, AliasChoices) else [ENV_PREFIX + name.upper()]
            found = next((environ[key] for key in keys if isinstance(key, str) and key in environ), None)
            if found is not None:
                values[name] = found
        return cls(**values)

    def target_schema_version(self) -> int:
        """The schema version migration Jobs apply: the configured one, else the code's."""
        if self.schema_version is not None:
            return self.schema_version
        from echo_memory.libs.server.store.migrations import CODE_SCHEMA_VERSION  # the services' own code

        return int(CODE_SCHEMA_VERSION)
