"""Wiring MCP clients (Claude Code, Cursor, Codex, Claude Desktop, VS Code, Gemini CLI) to Echo Memory.

`clients` says what each client needs and where; `files` edits config files safely (diff, backup,
atomic write, refuse invalid files); `remote` keeps this machine's choice of edge; `hooks` plans
the recall/capture hooks and the skill; `plan` puts a client's whole install together. The CLI
commands `install`, `uninstall`, `adopt` and `connect` (libs/local/cli/client_commands.py) use them.
"""

from echo_memory.libs.local.clients.clients import (
    CLIENTS,
    Client,
    Connection,
    detect_clients,
    echo_memory_command,
    existing_token,
    plan_install,
    plan_uninstall,
    user_text,
)
from echo_memory.libs.local.clients.files import ConfigError, FileChange, apply_changes
from echo_memory.libs.local.clients.remote import RemoteEdge, load_remote, save_remote, validate_remote

__all__ = [
    "CLIENTS",
    "Client",
    "ConfigError",
    "Connection",
    "FileChange",
    "RemoteEdge",
    "apply_changes",
    "detect_clients",
    "echo_memory_command",
    "existing_token",
    "load_remote",
    "plan_install",
    "plan_uninstall",
    "save_remote",
    "user_text",
    "validate_remote",
]
