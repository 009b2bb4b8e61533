"""Typed errors shared by the edge, the services and the CLI.

    EchoError                   code            retryable   what the caller should do
    ├── InvalidArgument         invalid_argument   no       fix the arguments
    ├── NotFound                not_found          no       check the name or id
    ├── ScopeDenied             scope_denied       no       use a scope the token grants
    ├── Unauthenticated         unauthenticated    no       get a valid token
    ├── Conflict                conflict           yes      retry the same call
    ├── SchemaTooOld            schema_too_old     no       run `echo-memory init-db`
    ├── SchemaTooNew            schema_too_new     no       upgrade echo-mem
    ├── NotBuilt                not_built          no       the feature is not implemented yet
    ├── RateLimited             rate_limited       yes      wait `retry_after` seconds
    ├── Unavailable             unavailable        yes      retry later (database or service down)
    ├── BusTimeout              bus_timeout        yes      retry later (no reply within the time-out)
    └── Internal                internal           no       report a bug

Errors cross the bus as `ErrorInfo` data and are rebuilt with `from_info` on the other side.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

# Where an MCP tool result carries its typed error (`_meta`), for every tool.
TOOL_ERROR_META_KEY = "echo-memory/error"


class ErrorInfo(BaseModel):
    """An error as data: what crosses the bus and what an MCP caller sees."""

    code: str = Field(description="stable machine-readable code, see docs/errors.md")
    message: str = Field(description="one sentence for a person")
    retryable: bool = Field(description="true when the same call may succeed later")
    retry_after: float | None = Field(None, description="seconds to wait before retrying, when known")


class EchoError(Exception):
    """Root of every error Echo Memory raises on purpose."""

    code: ClassVar[str] = "internal"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after

    def to_info(self) -> ErrorInfo:
        return ErrorInfo(
            code=self.code, message=self.message, retryable=self.retryable, retry_after=self.retry_after
        )


class InvalidArgument(EchoError):
    """The arguments break the tool's contract; nothing was changed."""

    code = "invalid_argument"


class NotFound(EchoError):
    """A named scope, entity, fact or document does not exist."""

    code = "not_found"


class ScopeDenied(EchoError):
    """The token does not grant the scope asked for."""

    code = "scope_denied"


class Unauthenticated(EchoError):
    """The token is missing, unknown or revoked."""

    code = "unauthenticated"


class Conflict(EchoError):
    """A concurrent change won; the same call may be retried."""

    code = "conflict"
    retryable = True


class SchemaTooOld(EchoError):
    """The database schema is older than this code."""

    code = "schema_too_old"


class SchemaTooNew(EchoError):
    """The database schema is newer than this code."""

    code = "schema_too_new"


class NotBuilt(EchoError):
    """The tool exists in the contract but its service is not implemented yet."""

    code = "not_built"


class RateLimited(EchoError):
    """Too many calls for this token; wait `retry_after` seconds."""

    code = "rate_limited"
    retryable = True


class Unavailable(EchoError):
    """A dependency (database, bus, service) cannot be reached right now."""

    code = "unavailable"
    retryable = True


class BusTimeout(EchoError):
    """No reply on the bus within the request's time-out."""

    code = "bus_timeout"
    retryable = True


class Internal(EchoError):
    """A bug: something failed that should not have."""

    code = "internal"


_BY_CODE: dict[str, type[EchoError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        ScopeDenied,
        Unauthenticated,
        Conflict,
        SchemaTooOld,
        SchemaTooNew,
        NotBuilt,
        RateLimited,
        Unavailable,
        BusTimeout,
        Internal,
    )
}


def from_info(info: ErrorInfo) -> EchoError:
    """Rebuild the typed error from its data form (unknown codes become `Internal`)."""
    cls = _BY_CODE.get(info.code, Internal)
    return cls(info.message, retry_after=info.retry_after)
