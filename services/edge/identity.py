"""Who is calling: bearer tokens verified by the org's writes service, cached briefly.

The token names its org (`em_<org>_…`), so the edge knows whom to ask. The verified identity
travels inside the SDK's AccessToken `claims`, and every tool call rebuilds the `Caller` from it:
the agent id on every fact comes from the token, never from tool arguments.
"""

from __future__ import annotations

import logging
import time

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier

from libs.bus.client import BusClient
from libs.contracts.admin import TokenVerifyResult
from libs.contracts.bus import Caller
from libs.contracts.errors import EchoError, Unauthenticated
from libs.contracts.subjects import valid_org
from libs.contracts.tokens import org_of

log = logging.getLogger(__name__)

EDGE_AGENT = "edge"  # the identity the edge uses for token verification requests only
CACHE_SECONDS = 5.0  # default: a revoked token stops working within this many seconds
_CACHE_MAX = 10_000  # tokens remembered at most, so random bearer strings cannot grow memory


class BusTokenVerifier(TokenVerifier):
    """Verifies `em_<org>_…` tokens with the org's writes service; None means HTTP 401.

    Args:
        bus: the edge's bus client.
        timeout: seconds the writes service has to answer.
        cache_seconds: how long an answer (valid or not) is reused; the revocation window.
        orgs: orgs whose tokens are accepted (`*` for any); a token naming another org is refused
            without asking anyone.
    """

    def __init__(
        self,
        bus: BusClient,
        timeout: float,
        *,
        cache_seconds: float = CACHE_SECONDS,
        orgs: list[str] | None = None,
    ) -> None:
        self._bus = bus
        self._timeout = timeout
        self._ttl = cache_seconds
        self._orgs = set(orgs) if orgs else {"*"}
        self._cache: dict[str, tuple[float, AccessToken | None]] = {}

    def forget(self, token: str | None = None) -> None:
        """Drop one cached answer (or all), so the next request asks the writes service again."""
        if token is None:
            self._cache.clear()
        else:
            self._cache.pop(token, None)

    def serves(self, org: str) -> bool:
        return "*" in self._orgs or org in self._orgs

    async def verify_token(self, token: str) -> AccessToken | None:
        now = time.monotonic()
        cached = self._cache.get(token)
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1]
        try:
            access = await self._verify(token)
        except EchoError as exc:
            log.warning("token verification failed: %s", exc.message)
            # The writes service is unreachable: keep serving tokens verified before, refuse new ones.
            return cached[1] if cached is not None else None
        if self._ttl > 0:
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()  # crude but bounded; the cost is one bus round trip per token
            self._cache[token] = (now, access)
        return access

    async def _verify(self, token: str) -> AccessToken | None:
        org = org_of(token)
        if org is None or not valid_org(org) or not self.serves(org):
            return None
        result = TokenVerifyResult.model_validate(
            await self._bus.call(
                caller=Caller(org=org, agent_id=EDGE_AGENT),
                service="writes",
                verb="token_verify",
                args={"token": token},
                timeout=self._timeout,
            )
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
