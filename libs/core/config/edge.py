"""Process settings of the MCP edge only: limits, origins, orgs served, token cache.

Shared settings (bind address, port, NATS URL, time-outs) stay in `echo_memory.libs.core.config.Settings`; these
are read from `ECHO_MEMORY_EDGE_*` variables, e.g. `ECHO_MEMORY_EDGE_RATE_PER_MINUTE=120`.
Tests build `EdgeSettings(...)` with keyword arguments.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class EdgeSettings(BaseSettings):
    """Limits and access rules of the HTTP (and stdio) edge."""

    model_config = SettingsConfigDict(env_prefix="ECHO_MEMORY_EDGE_", extra="ignore")

    rate_per_minute: float = Field(
        600.0, ge=0, description="tool calls per minute per token (token bucket refill); 0 disables the limit"
    )
    rate_burst: int = Field(60, ge=1, description="tool calls a token may make at once before the rate applies")
    refused_per_minute: float = Field(
        30.0, ge=0, description="refused bearer tokens per minute per client address before that address gets "
        "HTTP 429 without any token check (token bucket refill); 0 disables the limit",
    )
    refused_burst: int = Field(
        30, ge=1, description="refused bearer tokens a client address may present at once before the rate applies"
    )
    max_body_bytes: int = Field(
        1_048_576, ge=1024, description="largest HTTP request body accepted, in bytes (larger: HTTP 413)"
    )
    default_max_tokens: int = Field(
        2_000, ge=1, description="max_tokens given to query_memory when the caller sets none"
    )
    max_result_tokens: int = Field(
        8_000, ge=1, description="ceiling on query_memory's max_tokens; larger requests are lowered to it"
    )
    token_cache_seconds: float = Field(
        5.0, ge=0, description="how long a verified (or refused) token is remembered; a revocation takes "
        "effect within this many seconds"
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="browser origins allowed besides the edge's own loopback origins (exact, or `scheme://host:*`)",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host header values accepted besides loopback and the bind address (public DNS names of the edge)",
    )
    orgs: list[str] = Field(
        default_factory=list,
        description="orgs whose tokens this edge accepts; empty means only ECHO_MEMORY_ORG, `*` means every "
        "registered org",
    )
    metrics: bool = Field(True, description="serve Prometheus text metrics at /metrics")


__all__ = ["EdgeSettings"]
