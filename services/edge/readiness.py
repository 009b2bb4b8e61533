"""What `/readyz` checks: the bus is connected, and a writes and a retrieval service answer on it.

Each service is sent one request whose arguments no verb accepts: a live service refuses it with
`invalid_argument` before touching its database, so the probe proves the service answers without
doing any work or leaving any trace. Such arguments are no instance of the verb's model, so the
probe is sent by name (`call_by_name`); the verbs themselves are the table's constants.
"""

from __future__ import annotations

import asyncio
from typing import Any

from faststream.nats import NatsBroker

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import EchoError, InvalidArgument
from echo_memory.libs.core.contracts.verbs import QUERY_MEMORY, TOKEN_VERIFY, Verb
from echo_memory.libs.server.bus.client import BusClient

PROBE_AGENT = "readyz"
# Verbs whose argument models reject unknown fields (StrictModel): one of writes, one of retrieval.
PROBES: tuple[Verb[Any, Any], ...] = (TOKEN_VERIFY, QUERY_MEMORY)
PROBE_ARGS = {"readiness_probe": True}


async def not_ready_reason(broker: NatsBroker, org: str, timeout: float = 1.0) -> str | None:
    """None when the edge can serve; else why not, in a few words (`bus unreachable`, `… not answering`)."""
    if not await broker.ping(timeout=timeout):
        return "bus unreachable"
    bus = BusClient(broker)
    caller = Caller(org=org, agent_id=PROBE_AGENT)
    answers = await asyncio.gather(*(_answers(bus, caller, verb, timeout) for verb in PROBES))
    silent = [verb.service for verb, answered in zip(PROBES, answers, strict=True) if not answered]
    return f"{' and '.join(silent)} not answering" if silent else None


async def _answers(bus: BusClient, caller: Caller, verb: Verb[Any, Any], timeout: float) -> bool:
    try:
        await bus.call_by_name(caller=caller, service=verb.service, verb=verb.name, args=PROBE_ARGS, timeout=timeout)
    except InvalidArgument:
        return True  # the expected refusal: the service is there and working
    except EchoError:
        return False  # nobody subscribed, no answer in time, or the bus went away
    return True
