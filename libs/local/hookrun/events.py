"""Each client's hook stdin JSON, read into one shape, and the output shape each client expects.

Field names follow docs/clients.md (Claude Code, Codex, Gemini CLI, Cursor, VS Code Copilot). A
payload whose shape belongs to another client (VS Code and Cursor also run Claude Code's hooks)
is recognised, so a hook never answers in a shape its caller cannot read.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

CLIENT_NAMES = ("claude-code", "codex", "gemini", "cursor", "vscode")

# The event each client fires before the prompt (recall) and after the turn (capture).
RECALL_EVENT = {
    "claude-code": "UserPromptSubmit",
    "codex": "UserPromptSubmit",
    "gemini": "BeforeAgent",
    "cursor": "sessionStart",
    "vscode": "SessionStart",
}
CAPTURE_EVENT = {
    "claude-code": "Stop",
    "codex": "Stop",
    "gemini": "AfterAgent",
    "cursor": "afterAgentResponse",
    "vscode": "Stop",
}


class HookInput(NamedTuple):
    """What a hook needs from any client's payload; None where that client does not say."""

    client: str
    event: str
    session_id: str | None
    cwd: str | None
    prompt: str | None
    response: str | None
    transcript_path: str | None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def shape_of(payload: dict[str, Any]) -> str:
    """The client whose payload this is, from the keys only it sends."""
    if "hookEventName" in payload or "sessionId" in payload:
        return "vscode"
    if "conversation_id" in payload or "workspace_roots" in payload or "cursor_version" in payload:
        return "cursor"
    if "turn_id" in payload:
        return "codex"
    if "prompt_response" in payload or ("timestamp" in payload and "hook_event_name" in payload):
        return "gemini"
    return "claude-code"


def parse(client: str, raw: str) -> HookInput:
    """The payload as a HookInput.

    Raises:
        ValueError: not a JSON object.
    """
    payload = json.loads(raw)
    if not isinstance(payload, dict):
        raise ValueError("the hook payload is not a JSON object")
    if client == "vscode":
        event, session = payload.get("hookEventName"), payload.get("sessionId")
    elif client == "cursor":
        event, session = payload.get("hook_event_name"), payload.get("conversation_id")
    else:
        event, session = payload.get("hook_event_name"), payload.get("session_id")
    cwd = _str(payload.get("cwd"))
    roots = payload.get("workspace_roots")
    if cwd is None and isinstance(roots, list) and roots and isinstance(roots[0], str):
        cwd = roots[0]
    response = (
        _str(payload.get("last_assistant_message"))  # Claude Code, Codex Stop
        or _str(payload.get("prompt_response"))  # Gemini AfterAgent
        or _str(payload.get("text"))  # Cursor afterAgentResponse
    )
    return HookInput(
        client=client,
        event=str(event or ""),
        session_id=_str(session),
        cwd=cwd,
        prompt=_str(payload.get("prompt")),
        response=response,
        transcript_path=_str(payload.get("transcript_path")),
    )


def context_output(client: str, event: str, text: str) -> str:
    """The stdout that injects `text` as context for `client`'s recall event."""
    if client == "cursor":
        return json.dumps({"additional_context": text})
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})
