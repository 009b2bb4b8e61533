"""Where each client's hook and skill files are, and the edits `install` makes to them.

Hooks: recall before the prompt and capture after the turn (events in libs/local/hookrun/events.py),
merged into the client's own hook file beside everyone else's handlers; ours are recognised by
their command (`… hook recall|capture --client NAME`), so install is idempotent and uninstall
removes exactly them. VS Code gets a hook file of its own. Skills: one owned SKILL.md per client.
Planning is pure, like clients.py: every function returns FileChanges and touches nothing.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from echo_memory.libs.local.clients.files import ConfigError, FileChange, dump_json, load_json, read_text
from echo_memory.libs.local.hookrun.events import CAPTURE_EVENT, RECALL_EVENT
from echo_memory.libs.local.hookrun.paths import hook_tokens_path

HOOK_TIMEOUT_SECONDS = 10  # the client's own cap; the hook gives up on memory after 2 s anyway
SKILL_NAME = "echo-memory"
SKILL_MARK = "<!-- echo-memory: this skill is written by `echo-memory install`; uninstall removes it -->"

Overlay = dict[Path, "str | None"]  # planned text of files earlier steps of the same plan change


@dataclass(frozen=True)
class HookTarget:
    """One client's hook file and the shape of its handler lists."""

    file: Callable[[Path, Path | None], Path]  # (home, project) -> hook file
    nested: bool  # Claude-style groups {"hooks": [handler]} (else a flat list of handlers, Cursor)
    matcher: bool = False  # groups carry "matcher": "*" (Gemini)
    timeout_ms: bool = False  # timeout unit is milliseconds (Gemini)
    typed: bool = True  # handlers carry "type": "command"
    timeout: bool = True  # Cursor's timeout unit is undocumented: let it use its default


HOOKS: dict[str, HookTarget] = {
    "claude-code": HookTarget(lambda h, p: (p or h) / ".claude" / "settings.json", nested=True),
    "codex": HookTarget(lambda h, p: (p or h) / ".codex" / "hooks.json", nested=True),
    "gemini": HookTarget(lambda h, p: (p or h) / ".gemini" / "settings.json", nested=True, matcher=True,
                         timeout_ms=True),
    "cursor": HookTarget(lambda h, p: (p or h) / ".cursor" / "hooks.json", nested=False, typed=False,
                         timeout=False),
    "vscode": HookTarget(
        lambda h, p: (p / ".github" / "hooks" if p else h / ".copilot" / "hooks") / "echo-memory.json",
        nested=False,  # a file of our own in VS Code's hooks directory
    ),
}

SKILLS: dict[str, Callable[[Path, Path | None], Path]] = {
    "claude-code": lambda h, p: (p or h) / ".claude" / "skills" / SKILL_NAME / "SKILL.md",
    "codex": lambda h, p: (p or h) / ".agents" / "skills" / SKILL_NAME / "SKILL.md",
    "cursor": lambda h, p: (p or h) / ".cursor" / "skills" / SKILL_NAME / "SKILL.md",
    "vscode": lambda h, p: (p / ".github" if p else h / ".copilot") / "skills" / SKILL_NAME / "SKILL.md",
    "gemini": lambda h, p: (p or h) / ".gemini" / "skills" / SKILL_NAME / "SKILL.md",
}


def hook_command(executable: str, action: str, client: str) -> str:
    return f"{shlex.quote(executable)} hook {action} --client {client}"


def _is_ours(handler: Any, client: str) -> bool:
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    pattern = rf"echo-memory['\"]?\s+hook\s+(recall|capture)\s+--client\s+{re.escape(client)}\s*$"
    return re.search(pattern, handler["command"]) is not None


def _handler(target: HookTarget, command: str, name: str) -> dict[str, Any]:
    handler: dict[str, Any] = {"type": "command"} if target.typed else {}
    handler["command"] = command
    if target.matcher:
        handler["name"] = name
    if target.timeout:
        handler["timeout"] = HOOK_TIMEOUT_SECONDS * (1000 if target.timeout_ms else 1)
    return handler


def _entry(target: HookTarget, handler: dict[str, Any]) -> dict[str, Any]:
    if not target.nested:
        return handler
    return {"matcher": "*", "hooks": [handler]} if target.matcher else {"hooks": [handler]}


def _without_ours(entries: list[Any], target: HookTarget, client: str) -> list[Any]:
    kept: list[Any] = []
    for entry in entries:
        if not target.nested:
            if not _is_ours(entry, client):
                kept.append(entry)
            continue
        inner = entry.get("hooks") if isinstance(entry, dict) else None
        if not isinstance(inner, list) or not any(_is_ours(h, client) for h in inner):
            kept.append(entry)
            continue
        rest = [h for h in inner if not _is_ours(h, client)]
        if rest:
            kept.append({**entry, "hooks": rest})
    return kept


def _read(path: Path, overlay: Overlay | None) -> str | None:
    return overlay[path] if overlay is not None and path in overlay else read_text(path)


def _hooks_object(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: 'hooks' is not an object; nothing was changed")
    for event, entries in hooks.items():
        if not isinstance(entries, list):
            raise ConfigError(f"{path}: hooks.{event} is not a list; nothing was changed")
    return hooks


def plan_hooks(
    client: str, home: Path, project: Path | None, executable: str, overlay: Overlay | None = None
) -> FileChange:
    """The edit of `client`'s hook file that adds our recall and capture handlers (idempotent).

    Raises:
        ConfigError: the file is not valid JSON, or its `hooks` is not the documented shape.
    """
    target = HOOKS[client]
    path = target.file(home, project)
    before = _read(path, overlay)
    data = load_json(path, before)
    hooks = _hooks_object(path, data)
    wanted = {
        RECALL_EVENT[client]: _entry(target, _handler(target, hook_command(executable, "recall", client),
                                                      "echo-memory-recall")),
        CAPTURE_EVENT[client]: _entry(target, _handler(target, hook_command(executable, "capture", client),
                                                       "echo-memory-capture")),
    }
    changed = False
    for event, entry in wanted.items():
        current = hooks.get(event, [])
        ours = [e for e in current if e not in _without_ours([e], target, client)]
        if ours == [entry]:
            continue  # already exactly ours, wherever the user's handlers sit around it
        hooks[event] = [*_without_ours(current, target, client), entry]
        changed = True
    if not changed:
        return FileChange(path, before, before, f"{client}: hooks")
    data["hooks"] = hooks
    if client == "cursor":
        data = {"version": data.get("version", 1), **{k: v for k, v in data.items() if k != "version"}}
    return FileChange(path, before, dump_json(data), f"{client}: recall and capture hooks")


def plan_unhook(client: str, home: Path, project: Path | None) -> FileChange | None:
    """The edit that removes exactly our handlers (None: no hook file)."""
    path = HOOKS[client].file(home, project)
    before = read_text(path)
    if before is None:
        return None
    after = unhook_text(client, path, before)
    return FileChange(path, before, after, f"{client}: recall and capture hooks")


def unhook_text(client: str, path: Path, before: str) -> str | None:
    """`before` (the hook file's text) without our handlers; None when nothing else is left."""
    target = HOOKS[client]
    data = load_json(path, before)
    hooks = _hooks_object(path, data)
    touched = False
    for event in list(hooks):
        rest = _without_ours(hooks[event], target, client)
        if rest != hooks[event]:
            touched = True
            if rest:
                hooks[event] = rest
            else:
                del hooks[event]  # install added the event; leave no empty trace
    if not touched:
        return before
    if hooks:
        data["hooks"] = hooks
    else:
        data.pop("hooks", None)
    leftover = {k: v for k, v in data.items() if not (client == "cursor" and k == "version")}
    return dump_json(data) if leftover else None


def skill_text() -> str:
    """The SKILL.md every client gets (package data, libs/local/clients/skill/SKILL.md)."""
    text = resources.files("echo_memory.libs.local.clients").joinpath("skill/SKILL.md").read_text(encoding="utf-8")
    head, sep, body = text.partition("\n---\n")
    return head + sep + SKILL_MARK + "\n" + body


def plan_skill(client: str, home: Path, project: Path | None, *, remove: bool = False) -> FileChange | None:
    """Write (or, with `remove`, delete) our SKILL.md; None when the client reads no skills.

    A SKILL.md at that path without our mark is the user's: ConfigError, nothing changed.
    """
    where = SKILLS.get(client)
    if where is None:
        return None
    path = where(home, project)
    before = read_text(path)
    if before is not None and SKILL_MARK not in before:
        if remove:
            return FileChange(path, before, before, f"{client}: skill")
        raise ConfigError(f"{path} exists and was not written by `echo-memory install`; nothing was changed")
    after = None if remove else skill_text()
    return FileChange(path, before, after, f"{client}: skill '{SKILL_NAME}'", prune_empty_dir=True)


def plan_hook_tokens(tokens: dict[str, tuple[str, str | None] | None], home_dir: str | None) -> FileChange:
    """The hook credentials file with `tokens` set (client -> (token, MCP URL or None), None: remove).

    The hook of a client reads its token here (0600, in the user config dir, never in a project).
    """
    path = hook_tokens_path()
    before = read_text(path)
    data = load_json(path, before)
    clients = data.get("clients", {})
    if not isinstance(clients, dict):
        raise ConfigError(f"{path}: 'clients' is not an object; nothing was changed")
    for client, value in tokens.items():
        if value is None:
            clients.pop(client, None)
        else:
            clients[client] = {"token": value[0], "url": value[1]}
    if not clients:
        return FileChange(path, before, None, "hook credentials")
    after_data: dict[str, Any] = {"clients": dict(sorted(clients.items()))}
    home_dir = home_dir or data.get("home")  # removing one client keeps the others' data directory
    if home_dir:
        after_data["home"] = home_dir
    after = json.dumps(after_data, indent=2) + "\n"
    return FileChange(path, before, before if before == after else after, "hook credentials")


def merge_changes(changes: list[FileChange]) -> list[FileChange]:
    """One change per file: later changes of a file planned on top of earlier ones are folded in."""
    merged: dict[Path, FileChange] = {}
    for change in changes:
        first = merged.get(change.path)
        if first is None:
            merged[change.path] = change
            continue
        if change.before != first.after:
            raise ConfigError(f"{change.path}: two edits were planned from different versions; run again")
        merged[change.path] = FileChange(change.path, first.before, change.after, f"{first.what}; {change.what}",
                                         prune_empty_dir=first.prune_empty_dir or change.prune_empty_dir)
    return list(merged.values())


__all__ = ["HOOKS", "SKILLS", "hook_command", "merge_changes", "plan_hook_tokens", "plan_hooks", "plan_skill",
           "plan_unhook", "skill_text", "unhook_text"]
