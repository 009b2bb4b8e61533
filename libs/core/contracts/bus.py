"""Bus envelopes: who is calling, with which arguments, and the typed reply."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.errors import EchoError, ErrorInfo


class Caller(BaseModel):
    """The authenticated identity a request acts for; set by the edge or the CLI, never by tool args."""

    org: str
    agent_id: str
    read_scopes: list[str] = Field(default_factory=list)
    write_scopes: list[str] = Field(default_factory=list)
    tool: str | None = Field(None, description="the MCP client's name, for provenance")


class Request(BaseModel):
    """One bus request: the caller plus the verb's arguments (validated by the service)."""

    caller: Caller
    args: dict[str, Any] = Field(default_factory=dict)


class Reply(BaseModel):
    """Either `ok` with a result, or not `ok` with a typed error. Never both, never neither."""

    ok: bool
    result: dict[str, Any] | None = None
    error: ErrorInfo | None = None

    @classmethod
    def success(cls, result: BaseModel) -> Reply:
        return cls(ok=True, result=result.model_dump(mode="json"))

    @classmethod
    def failure(cls, error: EchoError) -> Reply:
        return cls(ok=False, error=error.to_info())


class Event(BaseModel):
    """An outbox event as published on JetStream (idempotent consumers key on `event_id`)."""

    event_id: int
    org: str
    kind: str
    payload: dict[str, Any]
