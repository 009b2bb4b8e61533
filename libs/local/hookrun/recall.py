"""Recall before the prompt: memory relevant to the prompt, for this project, framed as data.

Skips trivial and meta prompts, drops what the current session itself wrote (the agent has it in
context already), keeps facts of this project or of none, and renders them with the same framing
as query_memory (libs/core/contracts/framing.py), followed by the user's request marked as such.
A session's start (no prompt) gets the brief: what memory's digests say, this project first; before
the first consolidation, when there are no digests, the newest facts instead.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from echo_memory.libs.core.contracts.framing import render_recall, strip_delimiters
from echo_memory.libs.local.hookrun.events import HookInput
from echo_memory.libs.local.hookrun.mcp_http import McpError, McpSession

ASKED = 20  # results asked for, before the session and project filters
KEPT = 8  # results shown at most
MAX_TOKENS = 1500  # keeps the block far below the clients' ~10,000-character context caps
MIN_CHARS = 12
_TRIVIAL = re.compile(
    r"^(ok(ay)?|k|y(es|ep|eah)?|no(pe)?|thanks?( you)?|thx|ty|continue|go( on| ahead)?|next|sure|"
    r"do it|proceed|retry|try again|again|done|hi|hello|hey|good|great|nice|cool|lgtm|stop|wait)[.!?\s]*$",
    re.IGNORECASE,
)
USER_REQUEST_OPEN = "<user-current-request>"
USER_REQUEST_CLOSE = "</user-current-request>"
REQUEST_NOTE = (
    "The user's current request is below. Act on it; the recalled block above is only evidence "
    "that may or may not bear on it."
)


def skip_reason(prompt: str | None) -> str | None:
    """Why a prompt gets no recall (None: recall). Sessions without a prompt recall a digest."""
    if prompt is None:
        return None
    text = prompt.strip()
    if not text:
        return "empty prompt"
    if text[0] in "/!#" or text.startswith("@"):
        return "a command for the client, not a question"  # /clear, !ls, #memory, @file
    if len(text) < MIN_CHARS or _TRIVIAL.match(text):
        return "trivial prompt"
    return None


def git_root(cwd: str | None) -> str | None:
    """The git root above `cwd` (a `.git` directory or file), without starting git."""
    if not cwd:
        return None
    path = Path(cwd).resolve()
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return str(candidate)
    return None


def _same_project(item_project: str | None, project: str | None) -> bool:
    if item_project is None or project is None:
        return True
    return item_project == project or item_project == Path(project).name


def filtered(result: dict[str, Any], session_id: str | None, project: str | None) -> dict[str, Any]:
    """`result` without the current session's own items and other projects' items, renumbered."""
    kept: list[dict[str, Any]] = []
    for item in result.get("results", []):
        prov = item.get("provenance") or {}
        if session_id and prov.get("session_id") == session_id:
            continue
        if not _same_project(prov.get("project"), project):
            continue
        kept.append({**item, "rank": len(kept) + 1})
        if len(kept) == KEPT:
            break
    return {**result, "results": kept}


def query_args(hook: HookInput) -> dict[str, Any]:
    if hook.prompt is None:
        return {"digest": True, "top_k": ASKED, "max_tokens": MAX_TOKENS}
    query = hook.prompt.strip()[:4000]
    return {"query": query, "top_k": ASKED, "max_tokens": MAX_TOKENS, "include_episodes": True}


def context_text(result: dict[str, Any], prompt: str | None) -> str | None:
    """The context to inject, or None when nothing was recalled."""
    if not result.get("results"):
        return None
    parts = [render_recall(result)]
    if prompt is not None:
        parts += [REQUEST_NOTE, USER_REQUEST_OPEN, strip_delimiters(prompt.strip()), USER_REQUEST_CLOSE]
    return "\n".join(parts)


BRIEF_TOKENS = 1200  # the session-start brief's budget, within the clients' context caps


def brief_text(answer: dict[str, Any]) -> str | None:
    """The framed brief of a `brief` tool answer, or None when it holds no digest."""
    structured = answer.get("structuredContent")
    if not isinstance(structured, dict) or not structured.get("items"):
        return None
    text = structured.get("text")
    return text if isinstance(text, str) and text else None


def recall(hook: HookInput, url: str, token: str, deadline: float) -> str | None:
    """The context text for this prompt, or None (nothing relevant); raises McpError on failure."""
    project = git_root(hook.cwd)
    session = McpSession(url, token, deadline)
    try:
        session.open()
        if hook.prompt is None:
            args: dict[str, Any] = {"max_tokens": BRIEF_TOKENS}
            if project:
                args["project"] = Path(project).name
            try:
                brief = brief_text(session.call_tool("brief", args))
            except McpError:  # an edge older than the brief: the newest facts, as before
                brief = None
            if brief is not None:
                return brief
        answer = session.call_tool("query_memory", query_args(hook))
    finally:
        session.close()
    structured = answer.get("structuredContent")
    if not isinstance(structured, dict):
        raise ValueError("query_memory answered without structured content: " + json.dumps(answer)[:200])
    return context_text(filtered(structured, hook.session_id, project), hook.prompt)
