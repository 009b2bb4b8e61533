"""Capture after the turn, without making the agent wait: everything slow runs in a detached child.

A client that names its transcript gets the history importer on that file (incremental and
idempotent, so every turn is imported once however often it runs). A client that does not gets
this turn (its prompt, remembered by the recall hook, and the reply) stored as one episode by
`echo-memory hook-store-turn`, which uses the import_episodes verb.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from echo_memory.libs.local.hookrun import paths
from echo_memory.libs.local.hookrun.events import HookInput
from echo_memory.libs.local.hookrun.turns import take_prompt, write_private
from echo_memory.libs.local.private_files import open_private_append


def echo_memory_argv() -> list[str]:
    """The `echo-memory` command to spawn: $ECHO_MEMORY_BIN, else this interpreter's CLI module."""
    configured = os.environ.get(paths.BIN_ENV)
    if configured:
        return shlex.split(configured)
    return [sys.executable, "-P", "-m", "echo_memory.libs.local.cli"]  # -P: a `libs` folder in the cwd cannot shadow ours


def _spawn(argv: list[str]) -> None:
    paths.log_path().parent.mkdir(parents=True, exist_ok=True)
    log = open_private_append(paths.log_path())  # handed to the child, closed here after the fork
    try:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                         close_fds=True)
    finally:
        log.close()


def capture(hook: HookInput) -> str:
    """Start the capture of this turn in the background; returns what was started (for the log)."""
    prompt = take_prompt(hook)
    if hook.transcript_path and Path(hook.transcript_path).is_file():
        argv = [*echo_memory_argv(), "import", "--source", hook.client, "--file", hook.transcript_path]
        _spawn(argv)
        return "importer"
    if hook.response is None:
        return "nothing to capture (no reply in the payload)"
    turn = {
        "client": hook.client, "session_id": hook.session_id, "cwd": hook.cwd, "prompt": prompt,
        "response": hook.response, "at": int(time.time()),
    }
    pending = paths.sessions_dir() / f"turn-{os.getpid()}-{time.monotonic_ns()}.json"
    write_private(pending, json.dumps(turn))
    _spawn([*echo_memory_argv(), "hook-store-turn", str(pending)])
    return "episode"
