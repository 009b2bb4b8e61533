"""Where the hook runtime finds its token, the running system and its log, without loading settings.

Mirrors `echo_memory.libs.local.clients.remote.config_dir` and `echo_memory.libs.core.config.default_home`
with the standard library
only, so a hook process starts in milliseconds: ECHO_MEMORY_CONFIG_DIR / ECHO_MEMORY_HOME win, else
the platform's user config and data directories.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

CONFIG_DIR_ENV = "ECHO_MEMORY_CONFIG_DIR"
HOME_ENV = "ECHO_MEMORY_HOME"
TOKEN_ENV = "ECHO_MEMORY_TOKEN"
BIN_ENV = "ECHO_MEMORY_BIN"  # the echo-memory command a hook spawns for capture; default: this Python
HOOK_TOKENS_FILE = "hook-tokens.json"
HOOK_LOG_FILE = "hooks.log"


def _user_home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def config_dir() -> Path:
    override = os.environ.get(CONFIG_DIR_ENV)
    if override:
        return Path(override)
    if sys.platform == "darwin":
        return _user_home() / "Library" / "Application Support" / "echo-memory"
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or _user_home()) / "echo-memory"
    return Path(os.environ.get("XDG_CONFIG_HOME") or _user_home() / ".config") / "echo-memory"


def data_home() -> Path:
    override = os.environ.get(HOME_ENV)
    if override:
        return Path(override).expanduser()
    if sys.platform == "darwin":
        return _user_home() / "Library" / "Application Support" / "echo-memory"
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or _user_home()) / "echo-memory"
    return Path(os.environ.get("XDG_DATA_HOME") or _user_home() / ".local" / "share") / "echo-memory"


def hook_tokens_path() -> Path:
    return config_dir() / HOOK_TOKENS_FILE


def log_path() -> Path:
    return config_dir() / HOOK_LOG_FILE


def sessions_dir() -> Path:
    """Where the recall hook leaves the turn's prompt for the capture hook of the same session."""
    return config_dir() / "hook-sessions"
