"""Typed process settings (pydantic-settings), one `ECHO_MEMORY_` prefix for every process."""

from __future__ import annotations

from pathlib import Path

import platformdirs
from pydantic import BaseModel, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from echo_memory.libs.core.config.consolidation import ConsolidationSettings
from echo_memory.libs.core.config.retrieval import RetrievalSettings


def default_home() -> Path:
    """The user's data directory for Echo Memory (overridden by ECHO_MEMORY_HOME)."""
    return Path(platformdirs.user_data_dir("echo-memory", appauthor=False))


class Timeouts(BaseModel):
    """Seconds a bus request may take before the caller gets a retryable `bus_timeout` error."""

    write: float = Field(10.0, description="write_episode and the other writes verbs, in seconds")
    read: float = Field(5.0, description="query_memory, trace_cause, get_audit_log, in seconds")
    admin: float = Field(30.0, description="token, scope and status verbs, in seconds")
    bulk: float = Field(600.0, description="reindex, batched imports, in seconds")
    auth: float = Field(3.0, description="token verification at the edge, in seconds")


class Workers(BaseModel):
    """Requests one process of each service handles at once.

    Sized to the connection pool (`db_pool_size`): a request holds one connection for its
    transaction, and query_memory a second one for its side channels, so retrieval gets half.
    More workers than connections would only queue on the pool.
    """

    writes: int = Field(8, ge=1, description="writes verbs at once (writers of one scope still queue on its lock)")
    retrieval: int = Field(4, ge=1, description="query_memory calls at once (each may hold two connections)")
    causal: int = Field(8, ge=1, description="trace_cause calls at once")
    audit: int = Field(4, ge=1, description="audit, why, export and import calls at once")
    reindex: int = Field(2, ge=1, description="reindex and lexical_status calls at once")
    consolidation: int = Field(1, ge=1, description="consolidation calls at once")

    def of(self, service: str) -> int:
        """The worker count of `service`; 1 for a service without a setting."""
        return int(getattr(self, service, 1))


class Settings(BaseSettings):
    """Settings shared by the CLI, the supervisor and every service process."""

    model_config = SettingsConfigDict(
        env_prefix="ECHO_MEMORY_", env_nested_delimiter="__", extra="ignore"
    )

    home: Path = Field(default_factory=default_home, description="data directory (Postgres, NATS, logs, state)")
    org: str = Field("local", description="the org this process serves by default")
    database_url: SecretStr | None = Field(None, description="Postgres URL of the default org's database")
    nats_url: str | None = Field(None, description="NATS URL, e.g. nats://127.0.0.1:4222")
    edge_host: str = Field("127.0.0.1", description="address the MCP edge binds to")
    edge_port: int = Field(0, description="MCP edge port; 0 picks a free one")
    pg_port: int = Field(0, description="embedded Postgres port; 0 picks a free one")
    nats_port: int = Field(0, description="embedded nats-server port; 0 picks a free one")
    nats_credentials: Path | None = Field(
        None, description="file (mode 0600) with this process's NATS user and password; `up` writes one per "
        "process kind under <home>/run/ and hands it to its children",
    )
    nats_credentials_dir: Path | None = Field(
        None, description="directory of per-user credentials files (nats-<user>.json): a process hosting several "
        "services (`echo-memory service writes retrieval …`) connects each as its own user; `up` sets it",
    )
    nats_user: str | None = Field(
        None, description="NATS user of this process, given with nats_password instead of a credentials file "
        "(Kubernetes: the chart gives each component its own from a Secret)",
    )
    nats_password: SecretStr | None = Field(None, description="password of nats_user")
    token: SecretStr | None = Field(None, description="bearer token the CLI and `echo-memory mcp` use")
    timeouts: Timeouts = Field(default_factory=Timeouts)
    workers: Workers = Field(default_factory=Workers)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    consolidation: ConsolidationSettings = Field(default_factory=ConsolidationSettings)
    db_pool_size: int = Field(8, ge=1, description="Postgres connections per org in each service process")
    backup_page_bytes: int = Field(
        512 * 1024, ge=1024, le=960 * 1024,
        description="encoded bytes per export page and import chunk (a NATS message carries 1 MiB)",
    )
    log_level: str = Field("WARNING", description="log level of service processes")
    health_port: int | None = Field(
        None, ge=1, le=65535,
        description="port of a service's /healthz and /readyz (Kubernetes); set, a service whose database "
                    "schema does not fit waits not-ready, saying why, instead of exiting")
    schema_wait_seconds: float = Field(5.0, gt=0, description="how often a waiting service re-reads the schema")
    services_in_one_process: bool = Field(
        True, description="`up` runs every service in one process beside the edge: one interpreter and one "
        "embedding model instead of six interpreters and three models (~0.5 GB less); 0: one process per service")
    uvloop: bool = Field(True, description="run event loops on uvloop where it is installed (0: asyncio's own)")


def load_settings(**overrides: object) -> Settings:
    """Build settings from the environment; keyword overrides win (tests pass them)."""
    return Settings(**overrides)  # type: ignore[arg-type]


def settings_problems(exc: ValidationError) -> str:
    """What is wrong with the settings, one `field: reason` per problem, for a one-sentence refusal."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors())
