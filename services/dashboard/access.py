"""Who may use the dashboard: whoever holds this run's secret, from this machine, from our own page.

A random secret is made at each start and printed in the URL the user opens, in the fragment
(`#token=...`), which browsers never send to a server or put in a Referer. The page trades it once
for an HttpOnly, SameSite=Strict cookie (POST /api/session) and drops it from the address bar.
Every /api request needs that cookie (or the secret as a bearer token); a Host header that is not
our loopback address is refused (DNS rebinding), and so is a request from another page's origin.
"""

from __future__ import annotations

import hmac
import secrets

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE = "echo_dashboard"
LOOPBACK_HOST = "127.0.0.1"


def new_secret() -> str:
    """A fresh per-run secret (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def holds_secret(request: Request, secret: str) -> bool:
    """True when the request carries the secret as our cookie or as a bearer token."""
    given = request.cookies.get(COOKIE)
    if given is None:
        header = request.headers.get("authorization", "")
        given = header[7:] if header.lower().startswith("bearer ") else None
    return given is not None and same_secret(given, secret)


def same_secret(given: str, secret: str) -> bool:
    """Constant-time comparison, so response times do not leak how much of a guess was right."""
    return bool(given) and hmac.compare_digest(given.encode(), secret.encode())


def session_cookie(response: Response, secret: str) -> None:
    response.set_cookie(COOKIE, secret, httponly=True, samesite="strict", path="/")


def denied(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"code": code, "message": message, "retryable": False}, status_code=status)


class LoopbackGuard:
    """Refuse requests whose Host is not our own loopback address, or whose Origin is another site."""

    def __init__(self, app: ASGIApp, port: int) -> None:
        self.app = app
        self.hosts = {f"{LOOPBACK_HOST}:{port}", f"localhost:{port}"}
        self.origins = {f"http://{h}" for h in self.hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k: v.decode("latin-1") for k, v in scope["headers"]}
            host, origin = headers.get(b"host", ""), headers.get(b"origin")
            if host not in self.hosts:
                await denied(421, "wrong_host", f"this dashboard answers only on {LOOPBACK_HOST}")(scope, receive, send)
                return
            if origin is not None and origin not in self.origins:
                await denied(403, "origin_not_allowed", "requests from other pages are refused")(scope, receive, send)
                return
        await self.app(scope, receive, send)
