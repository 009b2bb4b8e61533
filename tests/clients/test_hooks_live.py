"""The recall and capture hooks as each client runs them: its real stdin JSON, against a real stack.

`hooks install` wires each client's hook file (after `connect`, so the hook finds the stack's HTTP
edge and its own token); the hook then runs as the client would start it, in its own process.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from echo_memory.libs.core.contracts.framing import CLOSE_TAG, FRAME, OPEN_TAG
from echo_memory.libs.local.cli.main import main
from echo_memory.libs.testing import EchoStack

FACT = "The billing service stores invoices in Postgres 16 with pgvector."
OWN_SESSION_TEXT = "Invoices in Postgres: this very session said so a minute ago."
PROMPT = "Where does the billing service keep its invoices?"


def _payloads(project: Path, transcript: Path | None) -> dict[str, dict[str, Any]]:
    """Each client's recall-event stdin, with the fields docs/clients.md lists."""
    t = str(transcript) if transcript else None
    return {
        "claude-code": {"session_id": "cc-1", "transcript_path": t, "cwd": str(project), "permission_mode": "default",
                        "hook_event_name": "UserPromptSubmit", "prompt": PROMPT},
        "codex": {"session_id": "cx-1", "turn_id": "t1", "transcript_path": None, "cwd": str(project),
                  "hook_event_name": "UserPromptSubmit", "model": "gpt-5", "permission_mode": "default",
                  "prompt": PROMPT},
        "gemini": {"session_id": "gm-1", "transcript_path": t, "cwd": str(project), "hook_event_name": "BeforeAgent",
                   "timestamp": "2026-12-01T10:00:00Z", "prompt": PROMPT},
        "cursor": {"hook_event_name": "sessionStart", "conversation_id": "cu-1", "generation_id": "g1",
                   "workspace_roots": [str(project)], "cursor_version": "2.4.0", "model": "auto"},
        "vscode": {"timestamp": "2026-12-01T10:00:00Z", "cwd": str(project), "sessionId": "vs-1",
                   "hookEventName": "SessionStart", "source": "new", "transcript_path": t},
    }


def _hook(action: str, client: str, payload: dict[str, Any] | str, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> tuple[int, str, float]:
    raw = payload if isinstance(payload, str) else json.dumps(payload)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "echo_memory.libs.local.cli", "hook", action, "--client", client],
        input=raw, capture_output=True, text=True, timeout=30, env=env or os.environ.copy(), cwd=cwd,
    )
    return done.returncode, done.stdout, time.perf_counter() - start


async def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
async def wired(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stack: EchoStack,
                capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """A machine connected to the stack's edge, every client's hooks installed, one fact stored."""
    home = tmp_path / "home"
    home.mkdir()
    config = tmp_path / "config"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ECHO_MEMORY_CONFIG_DIR", str(config))
    monkeypatch.setenv("ECHO_MEMORY_NATS_URL", stack.nats_url)
    monkeypatch.setenv("ECHO_MEMORY_ORG", stack.org)
    monkeypatch.delenv("ECHO_MEMORY_TOKEN", raising=False)
    project = tmp_path / "billing"
    (project / ".git").mkdir(parents=True)
    (project / "src").mkdir()
    code, _, err = await _cli(capsys, "connect", stack.url, stack.issue_token("laptop"))
    assert code == 0, err
    for client in ("claude-code", "codex", "gemini", "cursor", "vscode"):
        code, out, err = await _cli(capsys, "hooks", "install", "--for", client, "--yes")
        assert code == 0, err + out
    async with stack.client(stack.issue_token("seed")) as seed:
        written = await seed.call_tool("write_episode", {
            "session_id": "older-session", "project": str(project),
            "entities": [{"name": "billing service", "type": "service"}, {"name": "Postgres 16", "type": "database"}],
            "facts": [{"source": "billing service", "target": "Postgres 16", "relation": "stores invoices in",
                       "fact": FACT, "confidence": "extracted"}],
        })
        assert not written.is_error, written.content
    return {"home": home, "config": config, "project": project}


@pytest.mark.parametrize("client", ["claude-code", "codex", "gemini", "cursor", "vscode"])
async def test_recall_prints_the_clients_output_shape_with_framed_memory(
    wired: dict[str, Any], client: str
) -> None:
    payload = _payloads(wired["project"], None)[client]
    code, out, seconds = await asyncio.to_thread(_hook, "recall", client, payload, None, wired["project"] / "src")
    assert code == 0
    answer = json.loads(out)
    if client == "cursor":
        assert set(answer) == {"additional_context"}
        text = answer["additional_context"]
    else:
        assert set(answer) == {"hookSpecificOutput"}
        assert answer["hookSpecificOutput"]["hookEventName"] == payload.get("hook_event_name",
                                                                              payload.get("hookEventName"))
        text = answer["hookSpecificOutput"]["additionalContext"]
    assert text.startswith(OPEN_TAG + "\n" + FRAME) and CLOSE_TAG in text and FACT in text
    if "prompt" in payload:  # the prompt events mark the user's own request after the recalled block
        assert text.endswith(f"<user-current-request>\n{PROMPT}\n</user-current-request>")
        assert text.index(CLOSE_TAG) < text.index("<user-current-request>")
    print(f"{client}: recall hook {seconds * 1000:.0f} ms")


async def test_recall_leaves_out_the_current_sessions_own_turns_and_other_projects(
    wired: dict[str, Any], stack: EchoStack, tmp_path: Path
) -> None:
    other = tmp_path / "other-repo"
    await stack.admin_call("writes", "import_episodes", {"episodes": [
        {"content": OWN_SESSION_TEXT, "session_id": "cc-1", "project": str(wired["project"])},
        {"content": "Invoices for the billing service of another repo live in MySQL.", "session_id": "x",
         "project": str(other)},
    ]})
    payload = _payloads(wired["project"], None)["claude-code"]
    code, out, _ = await asyncio.to_thread(_hook, "recall", "claude-code", payload)
    text = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert FACT in text and OWN_SESSION_TEXT not in text and "MySQL" not in text

    code, out, _ = await asyncio.to_thread(_hook, "recall", "claude-code", {**payload, "session_id": "cc-2"})
    assert OWN_SESSION_TEXT in json.loads(out)["hookSpecificOutput"]["additionalContext"]  # another session sees it


@pytest.mark.parametrize("prompt", ["ok", "thanks!", "/clear", "!git status", "  "])
async def test_trivial_and_meta_prompts_recall_nothing(wired: dict[str, Any], prompt: str) -> None:
    payload = {**_payloads(wired["project"], None)["codex"], "prompt": prompt}
    code, out, _ = await asyncio.to_thread(_hook, "recall", "codex", payload)
    assert code == 0 and out == ""


async def test_a_claude_code_hook_run_by_vscode_answers_nothing(wired: dict[str, Any]) -> None:
    # VS Code also runs ~/.claude/settings.json hooks; its own Echo hook answers it instead.
    payload = {**_payloads(wired["project"], None)["vscode"], "hookEventName": "UserPromptSubmit", "prompt": PROMPT}
    code, out, _ = await asyncio.to_thread(_hook, "recall", "claude-code", payload)
    assert code == 0 and out == ""


async def test_capture_without_a_transcript_stores_the_turn_as_the_clients_episode(
    wired: dict[str, Any], stack: EchoStack
) -> None:
    project = wired["project"]
    before = {**_payloads(project, None)["gemini"], "prompt": "Which queue does billing publish refunds to?"}
    assert (await asyncio.to_thread(_hook, "recall", "gemini", before))[0] == 0
    after = {"session_id": "gm-1", "transcript_path": None, "cwd": str(project), "hook_event_name": "AfterAgent",
             "timestamp": "2026-12-01T10:00:05Z", "prompt": before["prompt"],
             "prompt_response": "Billing publishes refunds to the refunds.v2 queue on NATS.",
             "stop_hook_active": False}
    code, out, seconds = await asyncio.to_thread(_hook, "capture", "gemini", after)
    assert code == 0 and out == ""
    assert seconds < 5  # returned without waiting for the store (it runs detached)
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not found:
        answer = await stack.admin_call("retrieval", "query_memory",
                                        {"query": "refunds.v2 queue", "include_episodes": True, "top_k": 5})
        found = [r for r in answer["results"] if r["kind"] == "episode" and "refunds.v2" in r["text"]]
        await asyncio.sleep(0.5)
    assert found, (wired["config"] / "hooks.log").read_text()
    episode = found[0]
    assert episode["provenance"]["agent_id"] == "gemini" and episode["provenance"]["session_id"] == "gm-1"
    assert episode["provenance"]["project"] == str(project)
    assert episode["text"].startswith("user: Which queue does billing publish refunds to?\nassistant: ")
    assert not list((wired["config"] / "hook-sessions").glob("*.json"))  # the turn files are gone


async def test_capture_with_a_transcript_starts_the_importer_on_it(
    wired: dict[str, Any], tmp_path: Path
) -> None:
    transcript = tmp_path / "cc-1.jsonl"
    transcript.write_text('{"type":"user"}\n')
    seen = tmp_path / "argv.json"
    recorder = tmp_path / "record-argv"
    recorder.write_text(f"#!{sys.executable}\nimport json, sys\nopen({str(seen)!r}, 'w').write(json.dumps(sys.argv[1:]))\n")
    recorder.chmod(0o755)
    env = {**os.environ, "ECHO_MEMORY_BIN": str(recorder)}  # stands in for the importer's command line
    stop = {"session_id": "cc-1", "transcript_path": str(transcript), "cwd": str(wired["project"]),
            "hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "Done."}
    code, out, _ = await asyncio.to_thread(_hook, "capture", "claude-code", stop, env)
    assert code == 0 and out == ""
    deadline = time.monotonic() + 20
    while not seen.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert json.loads(seen.read_text()) == ["import", "--source", "claude-code", "--file", str(transcript)]


async def test_the_hooks_fail_open_with_the_system_down(wired: dict[str, Any], tmp_path: Path) -> None:
    remote = wired["config"] / "remote.json"
    saved = json.loads(remote.read_text())
    hook_tokens = json.loads((wired["config"] / "hook-tokens.json").read_text())
    for entry in hook_tokens["clients"].values():
        entry["url"] = "http://127.0.0.1:9/mcp"  # nothing listens there: the edge is down
    (wired["config"] / "hook-tokens.json").write_text(json.dumps(hook_tokens))
    payloads = _payloads(wired["project"], None)
    for client, payload in payloads.items():
        code, out, seconds = await asyncio.to_thread(_hook, "recall", client, payload)
        assert (code, out) == (0, ""), client
        assert seconds < 10
    code, out, _ = await asyncio.to_thread(_hook, "recall", "claude-code", "this is not JSON")
    assert (code, out) == (0, "")
    env = {k: v for k, v in os.environ.items() if k != "ECHO_MEMORY_NATS_URL"}
    env["ECHO_MEMORY_HOME"] = str(tmp_path / "no-system")  # the capture child finds no bus either
    stop = {**payloads["codex"], "hook_event_name": "Stop", "last_assistant_message": "ok", "stop_hook_active": False}
    code, out, _ = await asyncio.to_thread(_hook, "capture", "codex", stop, env)
    assert (code, out) == (0, "")
    log = (wired["config"] / "hooks.log").read_text()
    assert "recall failed" in log and "cannot be reached" in log and "JSONDecodeError" in log
    assert saved["url"]  # the connection itself was left as it was


async def test_two_recall_hooks_of_one_prompt_answer_once(wired: dict[str, Any]) -> None:
    """A global and a project install both in Claude Code's settings: both handlers run, one answers."""
    payload = {**_payloads(wired["project"], None)["claude-code"], "session_id": "cc-twice"}
    outs = await asyncio.gather(*(asyncio.to_thread(_hook, "recall", "claude-code", payload) for _ in range(2)))
    answered = [out for _, out, _ in outs if out]
    assert len(answered) == 1 and FACT in answered[0]
    assert "another echo-memory recall hook already answers this prompt" in (wired["config"] / "hooks.log").read_text()
    other = {**payload, "prompt": "Which database version stores the billing invoices?"}
    assert FACT in (await asyncio.to_thread(_hook, "recall", "claude-code", other))[1]  # the next prompt is answered


async def test_an_unexpanded_token_variable_gets_its_own_message(wired: dict[str, Any]) -> None:
    for value in ("${ECHO_MEMORY_TOKEN}", "$ECHO_MEMORY_TOKEN"):
        env = {**os.environ, "ECHO_MEMORY_TOKEN": value}
        payload = {**_payloads(wired["project"], None)["codex"], "session_id": f"cx-{value}"}
        code, out, _ = await asyncio.to_thread(_hook, "recall", "codex", payload, env)
        assert (code, out) == (0, "")
        log = (wired["config"] / "hooks.log").read_text()
        assert f"the token is the unexpanded placeholder '{value}', so ECHO_MEMORY_TOKEN was not set" in log


async def test_recall_shows_a_matching_project_file_nobody_ingested_yet(wired: dict[str, Any], stack: EchoStack) -> None:
    await stack.admin_call("writes", "register_documents", {"project": "billing", "documents": [
        {"path": "notes/refunds.md", "content": "Refunds above 500 euros need approval from the finance lead.\n"}]})
    payload = {**_payloads(wired["project"], None)["codex"], "session_id": "cx-docs",
               "prompt": "Who must approve a large refund?"}
    code, out, _ = await asyncio.to_thread(_hook, "recall", "codex", payload)
    text = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "[pending document, not yet ingested" in text and "billing:notes/refunds.md" in text
    assert "finance lead" in text
