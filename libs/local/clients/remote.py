"""This machine's choice of edge: a remote one saved by `echo-memory connect`, or the local system.

Stored as JSON in `<user config dir>/echo-memory/remote.json` (override the directory with
ECHO_MEMORY_CONFIG_DIR), readable by the user only, because it holds a token.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlparse

import platformdirs
from pydantic import BaseModel, Field, ValidationError

from echo_memory.libs.core.contracts.tokens import org_of
from echo_memory.libs.local.clients.files import ConfigError, FileChange, apply_changes, read_text

CONFIG_DIR_ENV = "ECHO_MEMORY_CONFIG_DIR"


class RemoteEdge(BaseModel):
    """A remote edge: its MCP URL and the bearer token this machine uses there."""

    url: str = Field(description="the edge's MCP endpoint, e.g. https://memory.example.com/mcp")
    token: str = Field(description="an agent token from `echo-memory token create` on the remote side")

    @property
    def org(self) -> str | None:
        return org_of(self.token)


def config_dir() -> Path:
    """Where the user config lives (ECHO_MEMORY_CONFIG_DIR wins)."""
    override = os.environ.get(CONFIG_DIR_ENV)
    return Path(override) if override else Path(platformdirs.user_config_dir("echo-memory", appauthor=False))


def remote_path() -> Path:
    return config_dir() / "remote.json"


def load_remote() -> RemoteEdge | None:
    """The connected remote edge, or None when this machine uses its local system.

    Raises:
        ConfigError: the file exists but is not a valid remote.json.
    """
    path = remote_path()
    text = read_text(path)
    if text is None:
        return None
    try:
        return RemoteEdge.model_validate_json(text)
    except ValidationError:
        raise ConfigError(f"{path} is not a valid remote edge file; run `echo-memory connect --local` to reset it") from None


def validate_remote(url: str, token: str) -> RemoteEdge:
    """A RemoteEdge from user input, or ConfigError saying what is wrong with it."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(f"'{url}' is not an http(s) URL; give the edge's MCP endpoint, e.g. https://host/mcp")
    if parsed.scheme == "http" and parsed.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise ConfigError("a remote edge must use https (the bearer token would cross the network in clear text)")
    if org_of(token) is None:
        raise ConfigError("that is not an Echo Memory token (they look like em_<org>_…)")
    return RemoteEdge(url=url.rstrip("/") if not url.endswith("/mcp/") else url[:-1], token=token)


def plan_connect(remote: RemoteEdge | None) -> FileChange:
    """The change to remote.json that `connect URL TOKEN` (or `connect --local`, with None) makes."""
    path = remote_path()
    before = read_text(path)
    after = None if remote is None else json.dumps(remote.model_dump(), indent=2) + "\n"
    return FileChange(path, before, after, "this machine's edge")


def save_remote(remote: RemoteEdge | None) -> None:
    """Write (or, with None, remove) remote.json atomically."""
    apply_changes([plan_connect(remote)])
    backup = remote_path().with_name(remote_path().name + ".echo-memory.bak")
    backup.unlink(missing_ok=True)  # an old token has no business lying around


__all__ = ["CONFIG_DIR_ENV", "RemoteEdge", "config_dir", "load_remote", "plan_connect", "remote_path",
           "save_remote", "validate_remote"]
