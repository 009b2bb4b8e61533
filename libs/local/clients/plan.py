"""Everything `install` writes for a client, in one plan: MCP entry, instructions, skill, hooks.

Several steps may edit one file (Gemini keeps servers and hooks in settings.json), so each step
plans on top of the earlier ones and the plan holds one change per file. Pure: nothing is written.
"""

from __future__ import annotations

from pathlib import Path

from echo_memory.libs.local.clients.clients import SERVER_NAME, Client, Connection, plan_install, plan_uninstall
from echo_memory.libs.local.clients.files import ConfigError, FileChange, load_json, read_text
from echo_memory.libs.local.clients.hooks import (
    HOOKS,
    merge_changes,
    plan_hook_tokens,
    plan_hooks,
    plan_skill,
    unhook_text,
)

PROJECT_COMMAND = "echo-memory"  # project files name the command on PATH, never this machine's paths


def global_overlap(client: Client, home: Path, project: Path | None) -> tuple[bool, bool]:
    """(MCP entry, recall hook) that a global install of `client` already provides in every project.

    Only Claude Code merges user and project settings this way: a second `echo-memory` server in the
    project's .mcp.json is the same name in two scopes (Claude Code reports conflicting scopes), and a
    second recall hook in .claude/settings.json fires beside the user's. (False, False) for a global
    install, other clients, or no global install.
    """
    if project is None or client.name != "claude-code":
        return False, False
    user_config = client.config(home, None)
    text = read_text(user_config) if user_config is not None else None
    try:
        servers = load_json(user_config, text).get(client.root_key) if user_config is not None else None
    except ConfigError:
        servers = None  # the install of the project goes on; a broken user file is not ours to judge here
    entry = isinstance(servers, dict) and SERVER_NAME in servers
    hook_file = HOOKS[client.name].file(home, None)
    hook_text = read_text(hook_file)
    try:
        hook = hook_text is not None and unhook_text(client.name, hook_file, hook_text) != hook_text
    except ConfigError:
        hook = False
    return entry, hook


def project_entry_here(client: Client, directory: Path) -> bool:
    """True when `directory` (where a global install of Claude Code is run) holds a project install's
    `echo-memory` entry in .mcp.json: in that project the name is then in two scopes."""
    if client.name != "claude-code":
        return False
    path = client.config(directory, directory)
    try:
        servers = load_json(path, read_text(path)).get(client.root_key) if path is not None else None
    except ConfigError:
        return False
    return isinstance(servers, dict) and SERVER_NAME in servers


def plan_client(
    client: Client, home: Path, project: Path | None, conn: Connection, token: str | None, executable: str,
    *, hooks: bool = True,
) -> list[FileChange]:
    """The changes installing `client` makes (see plan_install; adds its skill and hooks).

    A project install of Claude Code leaves out the MCP entry and the hooks that a global install
    already provides (global_overlap), so the two coexist.

    Raises:
        ConfigError: as plan_install, or a hook or skill file that cannot be edited safely.
    """
    has_entry, has_hook = global_overlap(client, home, project)
    changes = plan_install(client, home, project, conn, token)
    if has_entry:
        config = client.config(home, project)
        changes = [c for c in changes if c.path != config]
    hooks = hooks and not has_hook
    skill = plan_skill(client.name, home, project)
    if skill is not None:
        changes.append(skill)
    if hooks and client.name in HOOKS:
        overlay = {c.path: c.after for c in changes}
        changes.append(plan_hooks(client.name, home, project, executable, overlay))
    return merge_changes(changes)


def plan_client_removal(client: Client, home: Path, project: Path | None) -> list[FileChange]:
    """The changes `uninstall` makes: exactly what plan_client added."""
    changes = plan_uninstall(client, home, project)
    skill = plan_skill(client.name, home, project, remove=True)
    if skill is not None and skill.before is not None:
        changes.append(skill)
    if client.name in HOOKS:
        path = HOOKS[client.name].file(home, project)
        planned = {c.path: c.after for c in changes}
        before = planned[path] if path in planned else read_text(path)
        if before is not None:  # (Gemini: the hook file is the MCP file, so edit what uninstall leaves)
            changes.append(FileChange(path, before, unhook_text(client.name, path, before),
                                      f"{client.label}: recall and capture hooks"))
    return merge_changes(changes)


def plan_credentials(tokens: dict[str, tuple[str, str | None] | None], home_dir: str | None) -> list[FileChange]:
    """The hook credentials file change, when any client's hook token changes."""
    return [plan_hook_tokens(tokens, home_dir)] if tokens else []


__all__ = ["PROJECT_COMMAND", "global_overlap", "project_entry_here", "plan_client", "plan_client_removal", "plan_credentials"]
