"""Verbs the CLI uses: tokens, scopes, status."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import StrictModel


class TokenCreateInput(StrictModel):
    agent_id: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    read_scopes: list[str] = Field(default_factory=lambda: ["shared", "solo"])
    write_scopes: list[str] = Field(default_factory=lambda: ["shared", "solo"])


class TokenCreateResult(BaseModel):
    token: str = Field(description="shown once; only its hash is stored")
    token_id: str
    agent_id: str


class TokenVerifyInput(StrictModel):
    """The edge asks with the token's digest (libs/core/contracts/tokens.py `hash_token`), never the token itself."""

    token_hash: str = Field(pattern=r"^[0-9a-f]{64}$", description="sha256 of the whole token, lowercase hex")


class TokenVerifyResult(BaseModel):
    valid: bool
    agent_id: str | None = None
    token_id: str | None = Field(None, description="the live token's id (what token_revoke takes); its holder may know it")
    read_scopes: list[str] = Field(default_factory=list)
    write_scopes: list[str] = Field(default_factory=list)


class TokenInfo(BaseModel):
    token_id: str
    prefix: str
    agent_id: str
    read_scopes: list[str]
    write_scopes: list[str]
    created_at: datetime
    revoked_at: datetime | None


class TokenListResult(BaseModel):
    tokens: list[TokenInfo]


class TokenRevokeInput(StrictModel):
    token_id: str | None = None
    agent_id: str | None = None


class TokenRevokeResult(BaseModel):
    revoked: int


class ScopeCreateInput(StrictModel):
    name: str = Field(min_length=1, max_length=100, pattern=r"^[a-z0-9][a-z0-9_-]*$")
    description: str = ""


class ScopeCreateResult(BaseModel):
    name: str
    created: bool


class AgentCount(BaseModel):
    """One agent's facts in one scope."""

    agent_id: str
    facts: int
    active_facts: int
    last_write: datetime


class ScopeCount(BaseModel):
    scope: str
    facts: int
    active_facts: int
    last_write: datetime | None
    writers: list[AgentCount] = Field(default_factory=list, description="every agent that wrote here, newest first")


class StatusResult(BaseModel):
    schema_version: int
    scopes: list[ScopeCount]


class NoArgs(StrictModel):
    """Verbs that take no arguments still refuse unknown ones."""
