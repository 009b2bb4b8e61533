"""The smallest MCP client that can call one tool over Streamable HTTP, on the standard library.

initialize → notifications/initialized → tools/call → DELETE of the session, on one keep-alive
connection, every step bounded by one deadline. Replies may come as JSON or as an SSE stream.
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Any
from urllib.parse import urlsplit

PROTOCOL_VERSION = "2025-11-25"


class McpError(Exception):
    """The edge could not be reached, refused the token, or answered something unusable."""


class McpSession:
    """One short MCP session against `url` as the holder of `token`; close() ends it."""

    def __init__(self, url: str, token: str, deadline_seconds: float) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise McpError(f"not an http(s) MCP URL: {url}")
        self._deadline = time.monotonic() + deadline_seconds
        self._path = parts.path or "/mcp"
        self._token = token
        self._session: str | None = None
        self._next_id = 0
        timeout = max(0.05, deadline_seconds)
        self._conn: http.client.HTTPConnection
        if parts.scheme == "https":
            self._conn = http.client.HTTPSConnection(parts.hostname, parts.port or 443, timeout=timeout)
        else:
            self._conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)

    def _headers(self) -> dict[str, str]:
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        if self._session:
            headers["Mcp-Session-Id"] = self._session
            headers["MCP-Protocol-Version"] = PROTOCOL_VERSION
        return headers

    def _send(self, method: str, body: dict[str, Any] | None) -> tuple[int, dict[str, str], bytes]:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise McpError("the recall budget ran out")
        if self._conn.sock is not None:
            self._conn.sock.settimeout(left)
        else:
            self._conn.timeout = left
        data = json.dumps(body).encode("utf-8") if body is not None else None
        try:
            self._conn.request(method, self._path, body=data, headers=self._headers())
            response = self._conn.getresponse()
            payload = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise McpError(f"the edge cannot be reached ({type(exc).__name__}: {exc})") from exc
        return response.status, {k.lower(): v for k, v in response.getheaders()}, payload

    def _rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        status, headers, payload = self._send("POST", {"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        if status == 401:
            raise McpError("the edge refused the token (unknown, revoked, or for another org)")
        if status != 200:
            raise McpError(f"the edge answered HTTP {status} to {method}")
        if self._session is None and "mcp-session-id" in headers:
            self._session = headers["mcp-session-id"]
        message = _find_reply(payload, headers.get("content-type", ""), ident)
        if "error" in message:
            raise McpError(f"{method} failed: {message['error'].get('message', message['error'])}")
        result = message.get("result")
        if not isinstance(result, dict):
            raise McpError(f"{method} answered without a result")
        return result

    def open(self) -> None:
        self._rpc("initialize", {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "echo-memory-hook", "version": "1"},
        })
        status, _, _ = self._send("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"})
        if status not in (200, 202):
            raise McpError(f"the edge answered HTTP {status} to notifications/initialized")

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's CallToolResult as JSON; McpError when the call itself failed or the tool erred."""
        result = self._rpc("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            text = " ".join(str(c.get("text", "")) for c in result.get("content", []) if isinstance(c, dict))
            raise McpError(f"{name} failed: {text[:300]}")
        return result

    def close(self) -> None:
        """End the session on the edge (best effort, within what is left of the deadline)."""
        try:
            if self._session and self._deadline - time.monotonic() > 0.01:
                self._send("DELETE", None)
        except McpError:
            pass  # the answer is already in hand; a session the edge keeps will expire there
        finally:
            self._conn.close()


def _find_reply(payload: bytes, content_type: str, ident: int) -> dict[str, Any]:
    text = payload.decode("utf-8", errors="replace")
    if "text/event-stream" in content_type:
        candidates = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    else:
        candidates = [text]
    for candidate in candidates:
        try:
            message = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("id") == ident:
            return message
    raise McpError("the edge's reply holds no JSON-RPC answer")
