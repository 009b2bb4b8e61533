"""Do the real Claude Code and Codex CLIs accept the files `echo-memory install` writes?

    PATH=/path/to/node_modules/.bin:$PATH python -m lab.real_client_checks [--with-system]

Needs `claude` (npm @anthropic-ai/claude-code) and `codex` (npm @openai/codex) on PATH, Node 22.
In a throw-away HOME it runs `install --for claude-code|codex` (stdio, then HTTP after
`connect --no-check`, then `--project`), and asks the clients themselves: `claude mcp get/list`,
`claude doctor` (its "Invalid settings" section validates settings.json hooks), `codex mcp
get/list`, and Codex's app-server `hooks/list` (parses hooks.json: handlers, warnings, errors).
Prints each check with the client's verdict; exit 1 when a client rejected something. A check
of the files, not of a connection: the token is a placeholder, so "Failed to connect" is expected.
With --with-system it instead starts a real system in a temp data dir, runs `install --global`
and lets `claude mcp list` connect with the token install issued (exit 1 unless "✓ Connected").
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TOKEN = "em_local_" + "A" * 43
ANSI = re.compile(r"\x1b\[[0-9;?>]*[a-zA-Z]")


def _echo(env: dict[str, str], *argv: str, cwd: Path | None = None) -> None:
    argv_ = [sys.executable, "-m", "echo_memory.libs.local.cli", *argv]
    done = subprocess.run(argv_, env=env, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"echo-memory {' '.join(argv)} failed: {done.stderr or done.stdout}")


def _run(env: dict[str, str], argv: list[str], cwd: Path | None = None, timeout: float = 90) -> str:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return (done.stdout + done.stderr).strip()


def _doctor(env: dict[str, str], cwd: Path) -> str:
    # claude doctor needs a terminal (`script` gives it one) and waits for Enter once it has printed.
    done = subprocess.run(["timeout", "30", "script", "-qc", "claude doctor", "/dev/null"], env=env, cwd=cwd,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    text = ANSI.sub("", done.stdout)
    if "Invalid settings" in text or "Invalidsettings" in text.replace(" ", ""):
        return "REJECTED: " + text[text.find("Invalid"):][:800]
    return "no invalid settings reported" if "Diagnostics" in text else "no verdict: " + text[-300:]


def _codex_hooks(env: dict[str, str], cwd: Path) -> dict[str, Any]:
    proc = subprocess.Popen(["codex", "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env, cwd=cwd)
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    def answer(ident: int) -> dict[str, Any]:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1)
            if ready and proc.stdout is not None:
                message = json.loads(proc.stdout.readline())
                if message.get("id") == ident:
                    return dict(message)
        raise TimeoutError("codex app-server did not answer")

    try:
        send({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "echo-check", "version": "1"}}})
        answer(1)
        send({"method": "initialized"})
        send({"id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}})
        return answer(2)
    finally:
        proc.kill()


def _with_system(env: dict[str, str], base: Path) -> int:
    """A real system (`up --detach` in a temp data dir), `install --global`, and the clients connect."""
    env = {**env, "ECHO_MEMORY_HOME": str(base / "data")}
    try:
        _echo(env, "up", "--detach")
        _echo(env, "install", "--global", "--yes")
        claude = _run(env, ["claude", "mcp", "list"], base)
        codex = _run(env, ["codex", "mcp", "list"], base)
        print(f"== with a running system: claude mcp list\n{claude}\n\n== codex mcp list\n{codex}\n")
        return 0 if ("✓ Connected" in claude or "✔ Connected" in claude) else 1
    finally:
        _echo(env, "down")
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    for tool in ("claude", "codex", "script"):
        if shutil.which(tool) is None:
            print(f"{tool} is not on PATH; see the module docstring")
            return 2
    base = Path(tempfile.mkdtemp(prefix="echo-client-checks-"))
    home = base / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()
    project = base / "repo"
    (project / ".git").mkdir(parents=True)
    env = {**os.environ, "HOME": str(home), "ECHO_MEMORY_CONFIG_DIR": str(base / "config")}
    results: list[tuple[str, str]] = []
    rejected = False

    if "--with-system" in sys.argv:
        return _with_system(env, base)
    for phase in ("stdio", "http", "project"):
        if phase == "http":
            _echo(env, "connect", "https://memory.example.com/mcp", TOKEN, "--no-check")
        if phase == "project":
            _echo(env, "connect", "--local")
            for client in ("claude-code", "codex"):
                _echo(env, "uninstall", "--for", client, "--yes")  # the user entry would win over the project's
            for client in ("claude-code", "codex"):
                _echo(env, "install", "--for", client, "--project", str(project), "--yes")
            results.append(("project: claude mcp get", _run(env, ["claude", "mcp", "get", "echo-memory"], project)))
            results.append(("project: claude doctor", _doctor(env, project)))
            continue
        for client in ("claude-code", "codex"):
            _echo(env, "install", "--for", client, "--token", TOKEN, "--yes")
        results.append((f"{phase}: claude mcp get", _run(env, ["claude", "mcp", "get", "echo-memory"], base)))
        results.append((f"{phase}: claude mcp list", _run(env, ["claude", "mcp", "list"], base)))
        results.append((f"{phase}: claude doctor", _doctor(env, base)))
        results.append((f"{phase}: codex mcp get", _run(env, ["codex", "mcp", "get", "echo-memory"], base)))
        results.append((f"{phase}: codex mcp list", _run(env, ["codex", "mcp", "list"], base)))
        listed = _codex_hooks(env, base)["result"]["data"][0]
        ours = [f"{h['eventName']}: {h['command']} (timeout {h['timeoutSec']} s, {h['trustStatus']})"
                for h in listed["hooks"]]
        results.append((f"{phase}: codex hooks/list",
                        "\n".join(ours) + f"\nwarnings: {listed['warnings']}\nerrors: {listed['errors']}"))
        rejected |= bool(listed["errors"]) or len(ours) != 2

    for title, text in results:
        clean = "\n".join(line for line in text.splitlines() if "PATH aliases" not in line)
        print(f"== {title}\n{clean}\n")
        rejected |= clean.startswith("REJECTED") or "error" in clean.lower().split("errors: []")[0] \
            and "Failed to connect" not in clean
    shutil.rmtree(base, ignore_errors=True)
    return 1 if rejected else 0


if __name__ == "__main__":
    sys.exit(main())
