"""The embedded bus's credentials: one user per process kind, files 0600 under `<home>/run/`.

`up` makes any that are missing (and keeps existing ones, so a running `echo-memory mcp` still
authenticates after `down`/`up`); deleting `<home>/run/` while stopped rotates them all. Children
of `up` are given their file through ECHO_MEMORY_NATS_CREDENTIALS; the CLI and `echo-memory mcp`
started by hand find theirs here when they talk to this data directory's bus.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from echo_memory.libs.core.config import Settings
from echo_memory.libs.local.supervisor.state import read_state
from echo_memory.libs.server.bus.auth import (
    CredentialsError,
    NatsCredentials,
    credentials_path,
    new_credentials,
    read_credentials,
    settings_credentials,
    write_credentials,
)
from echo_memory.libs.server.bus.permissions import authorization, bus_users

RUN_DIR = "run"


def credentials_file(home: Path, user: str) -> Path:
    return credentials_path(home / RUN_DIR, user)


def ensure_credentials(home: Path) -> dict[str, NatsCredentials]:
    """Every bus user's credentials, reading the files that are valid and writing new ones for the rest."""
    found: dict[str, NatsCredentials] = {}
    for user in bus_users():
        path = credentials_file(home, user)
        try:
            credentials = read_credentials(path)
        except CredentialsError:
            credentials = new_credentials(user)
            write_credentials(path, credentials)
        if credentials.user != user:
            credentials = new_credentials(user)
            write_credentials(path, credentials)
        found[user] = credentials
    return found


def server_config(port: int, base: Path, users: dict[str, NatsCredentials]) -> str:
    """nats-server's configuration (JSON is valid NATS config): loopback, JetStream, one user per kind."""
    config = {
        "host": "127.0.0.1",
        "port": port,
        "jetstream": {"store_dir": str(base / "jetstream")},
        "log_file": str(base / "nats.log"),
        "authorization": authorization({u: c.password.get_secret_value() for u, c in users.items()}),
    }
    return json.dumps(config, indent=2)


def write_server_config(path: Path, text: str) -> None:
    """The config holds every password: written 0600 before any byte of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def process_credentials(settings: Settings, user: str, url: str) -> NatsCredentials | None:
    """The credentials this process connects to `url` with.

    ECHO_MEMORY_NATS_USER and ECHO_MEMORY_NATS_PASSWORD, or a file ECHO_MEMORY_NATS_CREDENTIALS
    names: those (CredentialsError when unusable). Else, when `url` is the bus of the embedded
    system in `settings.home`, its file for `user`. Else None: a bus configured elsewhere (a test's
    open server, a URL carrying its own credentials).
    """
    explicit = settings_credentials(settings)
    if explicit is not None:
        return explicit
    home = settings.home.expanduser()
    state = read_state(home)
    if state is None or state.nats_url != url:
        return None
    path = credentials_file(home, user)
    return read_credentials(path) if path.exists() else None


__all__ = ["credentials_file", "ensure_credentials", "process_credentials", "server_config", "write_server_config"]
