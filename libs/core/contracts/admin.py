"""Verbs the CLI uses: tokens, scopes, status."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import StrictModel


class TokenCreateInput(StrictModel):
    agent_id: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    read_scopes: list[str] = Field(default_factory=lambda: ["shared", "solo"],
                                   description="scopes it may read: shared, solo, `*` or existing named scopes")
    write_scopes: list[str] = Field(default_factory=lambda: ["shared", "solo"],
                                    description="scopes it may write: shared, solo, `*` or existing named scopes")


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


class TokenGrantInput(StrictModel):
    """Scopes added to a live token's grants; the scopes it already grants stay."""

    token_id: str = Field(min_length=1, max_length=100, description="the token's id, as `token list` shows it")
    read_scopes: list[str] = Field(default_factory=list, description="scopes it may read from now on, besides its own")
    write_scopes: list[str] = Field(default_factory=list, description="scopes it may write from now on, besides its own")


class TokenGrantResult(BaseModel):
    token: TokenInfo = Field(description="the token as it is now")
    added_read: list[str] = Field(description="read grants this call added (empty: it had them all)")
    added_write: list[str] = Field(description="write grants this call added (empty: it had them all)")


class ScopeCreateInput(StrictModel):
    name: str = Field(min_length=1, max_length=100, pattern=r"^[a-z0-9][a-z0-9_-]*$")
    description: str = ""


class ScopeCreateResult(BaseModel):
    name: str
    created: bool


class ScopeInfo(BaseModel):
    """One scope row as `scope list` shows it."""

    name: str = Field(description="the stored name: solo scopes are `solo:<agent>`")
    kind: str = Field(description="shared, solo or named")
    description: str
    facts: int = Field(description="fact versions stored in it, active and ended")
    active_facts: int
    episodes: int = Field(description="raw episodes (writes, imported turns, documents) stored in it")
    created_at: datetime


class ScopeListResult(BaseModel):
    scopes: list[ScopeInfo] = Field(description="every scope of the org, oldest first; `shared` always exists")


class ScopeNameInput(StrictModel):
    name: str = Field(min_length=1, max_length=140, description="a scope's stored name (`solo:<agent>` for a solo scope)")


class TokenAccess(BaseModel):
    """A live token that may read or write one scope, by its grants and the scope's reader/writer lists."""

    token_id: str
    prefix: str
    agent_id: str
    read: bool
    write: bool


class ScopeShowResult(BaseModel):
    scope: ScopeInfo
    readers: list[str] = Field(description="the scope's own reader list (`*`: every agent)")
    writers: list[str] = Field(description="the scope's own writer list (`*`: every agent)")
    tokens: list[TokenAccess] = Field(description="live tokens that may read or write it; empty when none may")


class ScopeDeleteResult(BaseModel):
    name: str
    tokens_updated: int = Field(description="live tokens whose grants named the scope; the name was taken out of them")


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
