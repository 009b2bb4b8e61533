"""The health panel's one seam: ask the audit service's `health` verb, if this build has one.

The verb and its result model live elsewhere; until the verb table lists it, the panel says so
instead of showing a figure nobody computed.
"""

from __future__ import annotations

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.health import HealthInput, HealthResult
from echo_memory.libs.core.contracts.verbs import HEALTH, verb
from echo_memory.libs.server.bus.client import BusClient

HEALTH_SERVICE = "audit"
HEALTH_VERB = "health"
NOT_AVAILABLE = "health is not available on this server"


def health_verb_exists() -> bool:
    """True when the verb table lists the health verb."""
    try:
        verb(HEALTH_SERVICE, HEALTH_VERB)
    except KeyError:
        return False
    return True


async def health_summary(bus: BusClient, caller: Caller, settings: Settings, scope: str | None) -> HealthResult | None:
    """The health verb's result; None when this server has no health verb.

    Raises what `BusClient.call` raises (a typed EchoError) when the verb exists but fails.
    """
    if not health_verb_exists():
        return None
    timeout = float(getattr(settings.timeouts, HEALTH.timeout))
    args = HealthInput(scope=scope) if scope else HealthInput()
    return await bus.call(HEALTH, args, caller=caller, timeout=timeout)
