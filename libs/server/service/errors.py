"""The one place where a failure inside a service becomes a typed error for the caller.

Most specific first: a conflict with a concurrent transaction is retryable as the same call; a
database that cannot be reached or gave up is `unavailable`; text Postgres cannot store (a NUL
character) is the caller's `invalid_argument`; anything else is a bug, logged with its traceback
and answered as `internal`.
"""

from __future__ import annotations

import logging

import psycopg
import psycopg_pool

from echo_memory.libs.core.contracts.errors import Conflict, EchoError, Internal, InvalidArgument, Unavailable

log = logging.getLogger(__name__)

_CONFLICTS = (
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.LockNotAvailable,
)


def as_echo_error(exc: BaseException, service: str) -> EchoError:
    """The typed error `exc` means for a caller of `service` (logs the unexpected ones)."""
    if isinstance(exc, EchoError):
        return exc
    if isinstance(exc, _CONFLICTS):
        return Conflict(f"a concurrent transaction got in the way ({type(exc).__name__}); nothing was changed, "
                        "retry the same call")
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return Unavailable(f"every database connection of the {service} service is busy; retry shortly")
    if isinstance(exc, psycopg.OperationalError):
        return Unavailable(f"the database failed ({type(exc).__name__}); nothing was changed, retry once it is back")
    if isinstance(exc, psycopg.DataError) and "NUL" in str(exc):
        return InvalidArgument("text must not contain NUL (0x00) characters")
    log.error("%s: unexpected %s", service, type(exc).__name__, exc_info=exc)
    return Internal(f"{service} failed with {type(exc).__name__}; nothing was changed, see the service log")
