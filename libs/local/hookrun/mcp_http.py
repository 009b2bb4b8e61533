"""The smallest MCP client that can call one tool over Streamable HTTP, on the standard library.

initialize → notifications/initialized → tools/call → DELETE of the session, on one keep-alive
connection, every step bounded by one deadline. Replies may come as JSON or as an SSE stream.
HTTP/1.1 is spoken over a plain socket: http.client pulls in the email package and ssl, which
would cost a hook more than the whole local round trip (ssl is loaded only for https URLs).
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

PROTOCOL_VERSION = "2025-11-25"


class McpError(Exception):
    """The edge could not be reached, refused the token, or answered something unusable."""


class McpSession:
    """One short MCP session against `url` as the holder of `token`; close() ends it."""

    def __init__(self, url: str, token: str, deadline_seconds: float) -> None:
        scheme, _, rest = url.partition("://")
        hostport, slash, path = rest.partition("/")
        if hostport.startswith("["):  # [::1]:8765
            host, _, after = hostport[1:].partition("]")
            port = after.removeprefix(":")
        else:
            host, _, port = hostport.partition(":")
        if not port.isdigit() and port:
            raise McpError(f"not an http(s) MCP URL: {url}")
        if scheme not in ("http", "https") or not host:
            raise McpError(f"not an http(s) MCP URL: {url}")
        self._scheme, self._host = scheme, host
        self._port = int(port) if port else (443 if scheme == "https" else 80)
        self._hostport = hostport
        self._path = slash + path if path else "/mcp"
        self._deadline = time.monotonic() + deadline_seconds
        self._token = token
        self._session: str | None = None
        self._next_id = 0
        self._sock: socket.socket | None = None
        self._buf = b""

    def _left(self) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise McpError("the recall budget ran out")
        return left

    def _connect(self) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection((self._host, self._port), timeout=self._left())
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._scheme == "https":
                import ssl

                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self._host)
            self._sock = sock
        return self._sock

    def _headers(self) -> dict[str, str]:
        headers = {
            "Host": self._hostport,
            "Authorization": f"Bearer {self._token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        if self._session:
            headers["Mcp-Session-Id"] = self._session
            headers["MCP-Protocol-Version"] = PROTOCOL_VERSION
        return headers

    def _send(self, method: str, body: dict[str, Any] | None) -> tuple[int, dict[str, str], bytes]:
        data = json.dumps(body).encode("utf-8") if body is not None else b""
        head = f"{method} {self._path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in self._headers().items())
        head += f"Content-Length: {len(data)}\r\n\r\n"
        try:
            sock = self._connect()
            sock.settimeout(self._left())
            sock.sendall(head.encode("latin-1") + data)
            return self._response()
        except OSError as exc:
            raise McpError(f"the edge cannot be reached ({type(exc).__name__}: {exc})") from exc

    def _read_until(self, marker: bytes) -> bytes:
        while marker not in self._buf:
            self._fill()
        line, _, self._buf = self._buf.partition(marker)
        return line

    def _read_exactly(self, size: int) -> bytes:
        while len(self._buf) < size:
            self._fill()
        data, self._buf = self._buf[:size], self._buf[size:]
        return data

    def _fill(self) -> None:
        assert self._sock is not None
        self._sock.settimeout(self._left())
        chunk = self._sock.recv(65536)
        if not chunk:
            raise McpError("the edge closed the connection mid-reply")
        self._buf += chunk

    def _response(self) -> tuple[int, dict[str, str], bytes]:
        lines = self._read_until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            raise McpError(f"not an HTTP reply: {lines[0][:80]!r}") from None
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self._read_until(b"\r\n").split(b";")[0], 16)
                if size == 0:
                    self._read_until(b"\r\n")
                    break
                body += self._read_exactly(size)
                self._read_exactly(2)
        else:
            body = self._read_exactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            self._drop()
        return status, headers, body

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self._buf = b""

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
            self._drop()


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
