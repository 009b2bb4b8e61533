"""NATS credentials of one process: a user and password, read from a 0600 file, and the connect options.

Every process on an authenticated bus connects as the user of its kind (a service, the edge, the
admin CLI). Its replies come back on its own inbox prefix (`_INBOX.<user>`), so the server can
let each user subscribe to its own replies and nobody else's.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nats.aio.client import Client as NatsClient
from pydantic import BaseModel, SecretStr, ValidationError

from echo_memory.libs.core.config import Settings

DEFAULT_INBOX = "_INBOX"


class CredentialsError(RuntimeError):
    """A credentials file is missing, unreadable, malformed, or readable by other users."""


class NatsCredentials(BaseModel):
    user: str
    password: SecretStr

    @property
    def inbox_prefix(self) -> str:
        return inbox_prefix(self.user)


def inbox_prefix(user: str) -> str:
    """Where replies to `user`'s requests are delivered: `_INBOX.<user>.<nuid>…`."""
    return f"{DEFAULT_INBOX}.{user}"


def credentials_path(directory: Path, user: str) -> Path:
    """Where `directory` keeps `user`'s credentials file (the embedded system writes one per bus user)."""
    return directory / f"nats-{user}.json"


def new_credentials(user: str) -> NatsCredentials:
    """A fresh random password (256 bits) for `user`."""
    return NatsCredentials(user=user, password=SecretStr(secrets.token_urlsafe(32)))


def write_credentials(path: Path, credentials: NatsCredentials) -> None:
    """Write `credentials` to `path`, mode 0600 from the first byte, replacing any older file atomically."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"user": credentials.user, "password": credentials.password.get_secret_value()}, handle)
    os.replace(tmp, path)


def read_credentials(path: Path) -> NatsCredentials:
    """The credentials in `path`; CredentialsError (one sentence) when it is absent, open to others or malformed."""
    try:
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise CredentialsError(f"{path} is readable by other users; make it private with `chmod 600 {path}`")
        return NatsCredentials.model_validate(json.loads(path.read_text()))
    except FileNotFoundError:
        raise CredentialsError(f"NATS credentials file {path} does not exist") from None
    except (OSError, ValueError, ValidationError) as exc:
        raise CredentialsError(f"cannot read NATS credentials from {path}: {exc}") from exc


def configured_credentials(path: Path | None) -> NatsCredentials | None:
    """The credentials in the file a setting names (ECHO_MEMORY_NATS_CREDENTIALS), or None when none is set."""
    return read_credentials(path.expanduser()) if path is not None else None


def settings_credentials(settings: Settings) -> NatsCredentials | None:
    """The credentials this process's settings name, or None when they name none.

    ECHO_MEMORY_NATS_USER with ECHO_MEMORY_NATS_PASSWORD (how the Helm chart hands each pod its
    own), else the file ECHO_MEMORY_NATS_CREDENTIALS. CredentialsError (one sentence) when only
    one of user and password is set, when both a file and a user are, or when the file is unusable.
    """
    user, password = settings.nats_user, settings.nats_password
    if user is None and password is None:
        return configured_credentials(settings.nats_credentials)
    if not user or password is None or not password.get_secret_value():
        raise CredentialsError("ECHO_MEMORY_NATS_USER and ECHO_MEMORY_NATS_PASSWORD must be set together")
    if settings.nats_credentials is not None:
        raise CredentialsError("set either ECHO_MEMORY_NATS_CREDENTIALS or ECHO_MEMORY_NATS_USER with "
                               "ECHO_MEMORY_NATS_PASSWORD, not both")
    return NatsCredentials(user=user, password=password)


def connect_options(credentials: NatsCredentials | None) -> dict[str, Any]:
    """Keyword arguments for `nats.connect` and `NatsBroker`: user, password and the user's inbox prefix."""
    if credentials is None:
        return {}
    return {
        "user": credentials.user,
        "password": credentials.password.get_secret_value(),
        "inbox_prefix": credentials.inbox_prefix,
    }


@dataclass(frozen=True)
class BusAccess:
    """How a process reaches the bus, worked out by whoever started it.

    `credentials` to connect with (None: the URL needs none); `follow`, when the starter knows the
    bus can move (the laptop supervisor's NATS), is started on the live connection and returns the
    task keeping it aimed at the bus (cancelled before the connection closes), or None.
    """

    credentials: NatsCredentials | None = None
    follow: Callable[[NatsClient], asyncio.Task[None] | None] | None = None


__all__ = ["BusAccess",
    "credentials_path",
    "CredentialsError", "NatsCredentials", "configured_credentials", "connect_options", "inbox_prefix", "new_credentials",
    "read_credentials", "settings_credentials", "write_credentials",
]
