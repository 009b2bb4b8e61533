"""Everything `install` writes for a client, in one plan: MCP entry, instructions, skill, hooks.

Several steps may edit one file (Gemini keeps servers and hooks in settings.json), so each step
plans on top of the earlier ones and the plan holds one change per file. Pure: nothing is written.
"""

from __future__ import annotations

from pathlib import Path

from echo_memory.libs.local.clients.clients import Client, Connection, plan_install, plan_uninstall
from echo_memory.libs.local.clients.files import FileChange, read_text
from echo_memory.libs.local.clients.hooks import (
    HOOKS,
    merge_changes,
    plan_hook_tokens,
    plan_hooks,
    plan_skill,
    unhook_text,
)

PROJECT_COMMAND = "echo-memory"  # project files name the command on PATH, never this machine's paths


def plan_client(
    client: Client, home: Path, project: Path | None, conn: Connection, token: str | None, executable: str,
    *, hooks: bool = True,
) -> list[FileChange]:
    """The changes installing `client` makes (see plan_install; adds its skill and hooks).

    Raises:
        ConfigError: as plan_install, or a hook or skill file that cannot be edited safely.
    """
    changes = plan_install(client, home, project, conn, token)
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


__all__ = ["PROJECT_COMMAND", "plan_client", "plan_client_removal", "plan_credentials"]
