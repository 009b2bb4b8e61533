"""The hook a client starts before every prompt loads only the standard library and framing.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HEAVY = ("pydantic", "psycopg", "onnxruntime", "nats", "faststream", "mcp", "httpx", "numpy", "email", "ssl")


def test_the_recall_hook_imports_nothing_heavy(tmp_path: Path) -> None:
    payload = {"session_id": "s", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
               "prompt": "Which database does the billing service use for invoices?"}
    env = {**os.environ, "ECHO_MEMORY_CONFIG_DIR": str(tmp_path), "ECHO_MEMORY_TOKEN": "em_t_" + "x" * 43}
    (tmp_path / "remote.json").write_text(json.dumps({"url": "http://127.0.0.1:9/mcp", "token": "unused"}))
    argv = [sys.executable, "-X", "importtime", "-m", "echo_memory.libs.local.cli", "hook", "recall", "--client", "codex"]
    done = subprocess.run(argv,
                          input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and done.stdout == ""  # nothing listens on port 9: fail-open, silent
    modules = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    # the whole recall path ran
    assert "echo_memory.libs.local.hookrun.recall" in modules and "echo_memory.libs.local.hookrun.mcp_http" in modules
    loaded_heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert loaded_heavy == []
    assert "cannot be reached" in (tmp_path / "hooks.log").read_text()
