"""`/healthz` and `/readyz` of a service process on Kubernetes (ECHO_MEMORY_HEALTH_PORT).

Liveness answers while the event loop runs. Readiness is 200 only once the service serves (schema
checked, bus connected); until then it is 503 with the reason as the body, e.g. a pod that waits for its
database to be migrated says so instead of exiting into CrashLoopBackOff.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class Health:
    """The process's health state and, once started, the tiny HTTP server that reports it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.reason = "starting"
        self.ready = False
        self._server: asyncio.Server | None = None
        self._connected: Callable[[], bool] = lambda: True

    def not_ready(self, reason: str) -> None:
        """Report not ready, saying why (shown as the body of /readyz)."""
        self.ready, self.reason = False, reason

    def serving(self, connected: Callable[[], bool] | None = None) -> None:
        """Report ready while ``connected()`` (the bus connection) holds."""
        self.ready, self.reason = True, "serving"
        if connected is not None:
            self._connected = connected

    async def start(self, port: int, host: str = "0.0.0.0") -> None:  # noqa: S104 (probes come from the kubelet)
        """Listen on ``port``; answers GET /healthz and /readyz, 404 for anything else."""
        self._server = await asyncio.start_server(self._handle, host, port)

    async def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(5):  # the whole request head; a silent client is dropped
                line = await reader.readline()
                while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    del header
            parts = line.decode("latin-1").split()
            path = parts[1] if len(parts) >= 2 else ""
            if path == "/healthz":
                code, body = 200, "ok"
            elif path == "/readyz":
                if self.ready and not self._connected():
                    code, body = 503, f"{self.name} not ready: NATS is disconnected (reconnecting)"
                elif self.ready:
                    code, body = 200, "ready"
                else:
                    code, body = 503, f"{self.name} not ready: {self.reason}"
            else:
                code, body = 404, "not found"
            data = body.encode()
            status = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}[code]
            writer.write(f"HTTP/1.1 {code} {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                         f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass  # a probe that hung up or sent garbage gets nothing
        finally:
            writer.close()
