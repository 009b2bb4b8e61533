"""How long a client waits for the recall hook: process start included, p50/p95 over N runs.

    python -m lab.hook_latency --runs 40 [--facts 200]

Starts a throw-away system (libs/local/eval/system.py), stores FACTS facts, wires a temp config dir the
way `hooks install` does (the hook's token and the edge URL in hook-tokens.json), then runs
`python -m echo_memory.libs.local.cli hook recall --client claude-code` N times with Claude Code's UserPromptSubmit
JSON on stdin, one at a time, and times each from spawn to exit. Also times, the same way, a
trivial prompt (start, parse, skip: the floor of any hook) and `python -c pass` (the interpreter
alone), and in-process the MCP round trips alone (initialize, tools/call, DELETE). Prints JSON.
With hyperfine on PATH it also times the installed command (`…/bin/echo-memory hook recall`, the
line install writes into the client's hook file) and `python -c pass` with hyperfine itself.
A measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from echo_memory.libs.local.eval.metrics import percentile
from echo_memory.libs.local.eval.system import throwaway_stack
from echo_memory.libs.local.hookrun.events import parse
from echo_memory.libs.local.hookrun.recall import recall
from echo_memory.libs.server import eventloop

PROMPTS = [
    "Where does the billing service keep its invoices?",
    "Which queue does the refunds worker consume from?",
    "What did we decide about retries for the payment gateway?",
    "Who owns the deploy pipeline for the search service?",
]


def _stats(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {"p50_ms": round(percentile(ms, 50), 1), "p95_ms": round(percentile(ms, 95), 1),
            "min_ms": round(min(ms), 1), "runs": len(ms)}


def _hyperfine(commands: list[str], runs: int, env: dict[str, str], work: Path) -> dict[str, Any]:
    """hyperfine's own timing of each command (its shell start subtracted), as p50/p95."""
    out = work / "hyperfine.json"
    subprocess.run(["hyperfine", "--shell=bash", "--warmup", "3", "--runs", str(runs), "--export-json", str(out),
                    *commands], env=env, check=True, capture_output=True, timeout=900)
    results = json.loads(out.read_text())["results"]
    return {r["command"]: _stats(r["times"]) for r in results}


def _run(argv: list[str], stdin: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=30)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr}")
    return elapsed


async def _measure(runs: int, facts: int) -> dict[str, Any]:
    async with throwaway_stack() as stack:
        async with stack.client(stack.issue_token("seed")) as seed:
            for i in range(facts):
                await seed.call_tool("write_episode", {
                    "session_id": "seed", "entities": [{"name": f"service {i}", "type": "service"},
                                                       {"name": f"store {i % 17}", "type": "database"}],
                    "entity_resolutions": [{"mention": f"service {i}", "entity_id": "new"}],
                    "facts": [{"source": f"service {i}", "target": f"store {i % 17}", "relation": "keeps data in",
                               "fact": f"Service {i} keeps its invoices and refunds in store {i % 17}.",
                               "confidence": "extracted"}],
                })
        token = stack.issue_token("claude-code")
        config = Path(tempfile.mkdtemp(prefix="hook-latency-"))
        (config / "hook-tokens.json").write_text(json.dumps({"clients": {"claude-code": {"token": token,
                                                                                       "url": stack.url}}}))
        env = {**os.environ, "ECHO_MEMORY_CONFIG_DIR": str(config)}
        hook = [sys.executable, "-m", "echo_memory.libs.local.cli", "hook", "recall", "--client", "claude-code"]

        def payload(prompt: str) -> str:
            return json.dumps({"session_id": "bench", "transcript_path": None, "cwd": os.getcwd(),
                               "hook_event_name": "UserPromptSubmit", "permission_mode": "default",
                               "prompt": prompt})

        def timed(argv: list[str], prompt: str | None) -> list[float]:
            out = []
            for i in range(runs):
                out.append(_run(argv, payload(prompt or PROMPTS[i % len(PROMPTS)]) if argv is hook else "", env))
            return out

        for _ in range(3):  # warm the embedder, the token cache and the page cache
            await asyncio.to_thread(_run, hook, payload(PROMPTS[0]), env)
        full = await asyncio.to_thread(timed, hook, None)
        trivial = await asyncio.to_thread(timed, hook, "ok")
        bare = await asyncio.to_thread(timed, [sys.executable, "-c", "pass"], "")
        rpc: list[float] = []
        for i in range(runs):
            start = time.perf_counter()
            await asyncio.to_thread(recall, parse("claude-code", payload(PROMPTS[i % len(PROMPTS)])), stack.url,
                                    token, 5.0)
            rpc.append(time.perf_counter() - start)
        stdin = config / "payload.json"
        stdin.write_text(payload(PROMPTS[0]))
        installed = f"{Path(sys.executable).with_name('echo-memory')} hook recall --client claude-code < {stdin}"
        figures = {}
        if shutil.which("hyperfine"):
            figures = await asyncio.to_thread(_hyperfine, [installed, f"{sys.executable} -c pass"], runs, env, config)
        return {
            "facts": facts, "cores": os.cpu_count(),
            "recall_hook_process": _stats(full),
            "trivial_prompt_process": _stats(trivial),
            "python_c_pass": _stats(bare),
            "mcp_round_trips_in_process": _stats(rpc),
            "hyperfine_installed_command": figures or "hyperfine is not installed",
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--facts", type=int, default=200)
    args = parser.parse_args()
    print(json.dumps(eventloop.run(_measure(args.runs, args.facts)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
