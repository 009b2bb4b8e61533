"""Who is calling: bearer tokens verified by the org's writes service, cached briefly.

The token names its org (`em_<org>_…`), so the edge knows whom to ask. The verified identity
travels inside the SDK's AccessToken `claims`, and every tool call rebuilds the `Caller` from it:
the agent id on every fact comes from the token, never from tool arguments.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from collections import OrderedDict

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier

from echo_memory.libs.core.contracts.admin import TokenVerifyInput
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import EchoError, RateLimited, Unauthenticated
from echo_memory.libs.core.contracts.subjects import valid_org
from echo_memory.libs.core.contracts.tokens import hash_token, org_of, well_formed
from echo_memory.libs.core.contracts.verbs import TOKEN_VERIFY
from echo_memory.libs.server.bus.client import BusClient
from echo_memory.services.edge.limits import RateLimiter

log = logging.getLogger(__name__)

EDGE_AGENT = "edge"  # the identity the edge uses for token verification requests only
CACHE_SECONDS = 5.0  # default: a revoked token stops working within this many seconds
# Live tokens and refused strings are remembered apart, each bounded: a flood of random bearer
# strings can only push out other refused strings, never a live token's entry.
VALID_CACHE_MAX = 10_000
REFUSED_CACHE_MAX = 10_000
# The peer of the HTTP request being authenticated (set by PeerGate); None over stdio.
current_peer: contextvars.ContextVar[str | None] = contextvars.ContextVar("current_peer", default=None)


class _Bounded:
    """A least-recently-used map of token digest → (when, answer), holding at most `size` entries."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: OrderedDict[str, tuple[float, AccessToken | None]] = OrderedDict()

    def get(self, key: str) -> tuple[float, AccessToken | None] | None:
        found = self.entries.get(key)
        if found is not None:
            self.entries.move_to_end(key)
        return found

    def put(self, key: str, value: tuple[float, AccessToken | None]) -> None:
        self.entries[key] = value
        self.entries.move_to_end(key)
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)


class BusTokenVerifier(TokenVerifier):
    """Verifies `em_<org>_…` tokens with the org's writes service; None means HTTP 401.

    Only the token's sha256 digest is sent on the bus (what the store keeps), never the token.
    A string that is not shaped like a token, or names an org this edge does not serve, is refused
    without asking anyone. Each refusal is charged to the HTTP peer's `failures` bucket (PeerGate
    stops a peer whose bucket is empty before any bus round trip).

    Args:
        bus: the edge's bus client.
        timeout: seconds the writes service has to answer.
        cache_seconds: how long an answer (valid or not) is reused; the revocation window.
        orgs: orgs whose tokens are accepted (`*` for any).
        failures: per-peer limiter charged once for every refused token.
    """

    def __init__(
        self,
        bus: BusClient,
        timeout: float,
        *,
        cache_seconds: float = CACHE_SECONDS,
        orgs: list[str] | None = None,
        failures: RateLimiter | None = None,
    ) -> None:
        self._bus = bus
        self._timeout = timeout
        self._ttl = cache_seconds
        self._orgs = set(orgs) if orgs else {"*"}
        self._valid = _Bounded(VALID_CACHE_MAX)
        self._refused = _Bounded(REFUSED_CACHE_MAX)
        self.failures = failures
        self.bus_calls = 0  # token_verify requests sent (tests and metrics read it)

    def forget(self, token: str | None = None) -> None:
        """Drop one cached answer (or all), so the next request asks the writes service again."""
        if token is None:
            self._valid.entries.clear()
            self._refused.entries.clear()
        else:
            self._valid.entries.pop(hash_token(token), None)
            self._refused.entries.pop(hash_token(token), None)

    def serves(self, org: str) -> bool:
        return "*" in self._orgs or org in self._orgs

    def cached_valid(self, token: str) -> bool:
        """True when `token` was verified live within the cache window (no bus trip needed)."""
        found = self._valid.entries.get(hash_token(token))
        return found is not None and time.monotonic() - found[0] < self._ttl

    async def verify_token(self, token: str) -> AccessToken | None:
        access, refused = await self._verify_cached(token)
        if refused:
            self._charge_peer()
        return access

    async def _verify_cached(self, token: str) -> tuple[AccessToken | None, bool]:
        """The token's identity (None: 401) and whether the token itself was refused.

        A check that could not be made (the writes service unreachable) is not the caller's fault
        and is not charged to its address.
        """
        if not well_formed(token):
            return None, True
        digest = hash_token(token)
        now = time.monotonic()
        cached = self._valid.get(digest) or self._refused.get(digest)
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1], cached[1] is None
        try:
            access = await self._verify(token, digest)
        except EchoError as exc:
            log.warning("token verification failed: %s", exc.message)
            # The writes service is unreachable: keep serving tokens verified before, refuse new ones.
            if cached is not None:
                return cached[1], cached[1] is None
            return None, False
        if self._ttl > 0:
            if access is not None:
                self._refused.entries.pop(digest, None)
                self._valid.put(digest, (now, access))
            else:
                self._valid.entries.pop(digest, None)
                self._refused.put(digest, (now, None))
        return access, access is None

    def _charge_peer(self) -> None:
        peer = current_peer.get()
        if peer is not None and self.failures is not None:
            # Already empty: PeerGate refuses this peer's next unverified request.
            with contextlib.suppress(RateLimited):
                self.failures.check(peer)

    async def _verify(self, token: str, digest: str) -> AccessToken | None:
        org = org_of(token)
        if org is None or not valid_org(org) or not self.serves(org):
            return None
        self.bus_calls += 1
        result = await self._bus.call(
            TOKEN_VERIFY, TokenVerifyInput(token_hash=digest),
            caller=Caller(org=org, agent_id=EDGE_AGENT), timeout=self._timeout,
        )
        if not result.valid or result.agent_id is None:
            return None
        return AccessToken(
            token=token,
            client_id=result.agent_id,
            scopes=["memory"],
            claims={"org": org, "read_scopes": result.read_scopes, "write_scopes": result.write_scopes},
        )


def caller_from_access(access: AccessToken, tool: str | None) -> Caller:
    claims = access.claims or {}
    return Caller(
        org=str(claims["org"]),
        agent_id=access.client_id,
        read_scopes=list(claims.get("read_scopes", [])),
        write_scopes=list(claims.get("write_scopes", [])),
        tool=tool,
    )


def current_http_caller(tool: str | None) -> Caller:
    """The caller of the HTTP request being served."""
    access = get_access_token()
    if access is None:
        raise Unauthenticated("no verified bearer token on this request")
    return caller_from_access(access, tool)
