"""The prompt of the turn in progress, left by the recall hook for the capture hook of the session.

Stop/afterAgentResponse payloads of some clients carry the reply but not the prompt; the pair is
one episode. Files are 0600 in a 0700 directory and are removed when the capture takes them.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from echo_memory.libs.local.hookrun import paths
from echo_memory.libs.local.hookrun.events import HookInput


def _session_file(client: str, session_id: str) -> Path:
    digest = hashlib.sha256(f"{client}\0{session_id}".encode()).hexdigest()[:24]
    return paths.sessions_dir() / f"{digest}.json"


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` readable by the user only, replacing it in one rename."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def remember_prompt(hook: HookInput) -> None:
    if hook.session_id is None or hook.prompt is None:
        return
    write_private(_session_file(hook.client, hook.session_id),
                  json.dumps({"prompt": hook.prompt, "cwd": hook.cwd, "at": int(time.time())}))


def take_prompt(hook: HookInput) -> str | None:
    """The prompt the recall hook saw for this session's turn (and forget it), or None."""
    if hook.session_id is None:
        return None
    path = _session_file(hook.client, hook.session_id)
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    path.unlink(missing_ok=True)
    prompt = saved.get("prompt") if isinstance(saved, dict) else None
    return prompt if isinstance(prompt, str) else None
