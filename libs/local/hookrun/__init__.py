"""The hook runtime: what a client runs before a prompt (`recall`) and after a turn (`capture`).

`echo-memory hook recall|capture --client NAME` reads the client's hook JSON on stdin. It imports
only the standard library and libs/core/contracts/framing.py, so it starts fast, and it fails open: on
any failure it prints nothing, exits 0 and appends one line to `hooks.log` in the user config dir.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from echo_memory.libs.local.hookrun import paths
from echo_memory.libs.local.hookrun.events import CLIENT_NAMES, context_output, parse, shape_of
from echo_memory.libs.local.private_files import open_private_text

DEADLINE_SECONDS = 2.0  # the whole recall round trip; the agent proceeds without memory after it
USAGE = "usage: echo-memory hook recall|capture --client " + "|".join(CLIENT_NAMES)
# Clients that also run Claude Code's hook files; their payloads are left to their own Echo hooks.
FOREIGN_SHAPES = {"claude-code": ("vscode", "cursor")}


def _log(client: str, what: str) -> None:
    try:
        path = paths.log_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with open_private_text(path, "a") as handle:  # the log names sessions and stored episodes
            handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {os.getpid()} {client}: {what}\n")
    except OSError:
        pass  # nowhere left to report to; the agent must still proceed


def _credentials(client: str) -> tuple[str, str]:
    """(MCP URL, token) for `client`'s hooks; ValueError naming what is missing."""
    saved: dict[str, Any] = {}
    tokens_file = paths.hook_tokens_path()
    if tokens_file.exists():  # absent for project installs: the token comes from the environment
        saved = json.loads(tokens_file.read_text(encoding="utf-8"))
    entry = (saved.get("clients") or {}).get(client) or {}
    token = os.environ.get(paths.TOKEN_ENV) or entry.get("token")
    if not token:
        raise ValueError(f"no token: set {paths.TOKEN_ENV} or run `echo-memory hooks install --for {client}`")
    url = entry.get("url")
    if not url:
        try:
            url = json.loads((paths.config_dir() / "remote.json").read_text(encoding="utf-8"))["url"]
        except FileNotFoundError:
            home = Path(saved["home"]) if saved.get("home") and not os.environ.get(paths.HOME_ENV) else paths.data_home()
            state = json.loads((home / "state.json").read_text(encoding="utf-8"))
            url = state.get("edge_url")
    if not url:
        raise ValueError("the local system runs no HTTP edge; start it with `echo-memory up`")
    return str(url), str(token)


def run(action: str, client: str, raw: str) -> str | None:
    """The hook's stdout for this payload (None: print nothing). Raises on any failure."""
    hook = parse(client, raw)
    foreign = shape_of(json.loads(raw))
    if foreign in FOREIGN_SHAPES.get(client, ()):
        return None
    if action == "capture":
        from echo_memory.libs.local.hookrun.capture import capture

        _log(client, f"capture {hook.event}: {capture(hook)}")
        return None
    from echo_memory.libs.local.hookrun import recall, turns

    turns.remember_prompt(hook)
    if recall.skip_reason(hook.prompt) is not None:
        return None
    url, token = _credentials(client)
    text = recall.recall(hook, url, token, DEADLINE_SECONDS)
    return None if text is None else context_output(client, hook.event or "", text)


def main(argv: Sequence[str]) -> int:
    """Always 0: a hook never blocks or fails the agent's turn."""
    args = list(argv)
    if len(args) != 3 or args[0] not in ("recall", "capture") or args[1] != "--client" or args[2] not in CLIENT_NAMES:
        print(USAGE, file=sys.stderr)
        return 0
    action, client = args[0], args[2]
    try:
        out = run(action, client, sys.stdin.read())
    except BaseException as exc:  # noqa: BLE001 - fail open, but say why in the log
        import traceback

        _log(client, f"{action} failed: {type(exc).__name__}: {exc} | {traceback.format_exc(limit=3)!r}")
        return 0
    if out:
        sys.stdout.write(out)
        sys.stdout.flush()
    return 0
