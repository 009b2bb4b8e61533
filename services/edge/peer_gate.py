"""Refuse (HTTP 429) a client address that keeps presenting bad tokens, before any token check.

Each refused token is charged to its peer's bucket (services/edge/identity.py); once the bucket is
empty, that peer's requests to /mcp are answered 429 here without a bus round trip, unless they
carry a token verified live within the cache window. A live token is never charged.

Behind a proxy every request has the proxy's address: the limit then applies to all of them at
once, which still bounds the bus traffic a flood of bad tokens causes.
"""

from __future__ import annotations

import math

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from echo_memory.libs.core.contracts.tokens import token_problem
from echo_memory.services.edge.identity import BusTokenVerifier, current_peer
from echo_memory.services.edge.limits import RateLimiter


def _bearer(scope: Scope) -> str | None:
    for key, value in scope["headers"]:
        if key == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


class PeerGate:
    def __init__(self, app: ASGIApp, verifier: BusTokenVerifier, failures: RateLimiter) -> None:
        self.app = app
        self.verifier = verifier
        self.failures = failures

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith("/mcp"):
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        peer = str(client[0]) if client else "unknown"
        token = _bearer(scope)
        problem = token_problem(token)
        if problem is not None:
            # An unset ${ECHO_MEMORY_TOKEN} in a client's config: say that, not "invalid token".
            challenge = f'Bearer error="invalid_token", error_description="{problem}"'
            response = JSONResponse({"error": "invalid_token", "error_description": problem}, status_code=401,
                                    headers={"WWW-Authenticate": challenge})
            await response(scope, receive, send)
            return
        if not self.failures.available(peer) and not (token and self.verifier.cached_valid(token)):
            wait = self.failures.retry_after(peer)
            response = JSONResponse(
                {"error": "rate_limited", "message": f"too many refused tokens from {peer}; retry in {wait:.1f} s",
                 "retry_after": round(wait, 3)},
                status_code=429, headers={"Retry-After": str(max(1, math.ceil(wait)))},
            )
            await response(scope, receive, send)
            return
        reset = current_peer.set(peer)
        try:
            await self.app(scope, receive, send)
        finally:
            current_peer.reset(reset)


__all__ = ["PeerGate"]
