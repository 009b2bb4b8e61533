"""The one way to call a service: a typed request with an explicit time-out.

Callers name a verb constant (libs/core/contracts/verbs.py) and pass its argument model; they get
its result model, or a typed `EchoError`: a missing service is `Unavailable`, a silent one is
`BusTimeout`, both retryable; never an empty success. When the bus itself is down (the connection
is closed or reconnecting) the error says so, `Unavailable`, and names no service: the service may
well be fine. A reply that is not the verb's result model is `Internal`, as a malformed one is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import nats.errors
from faststream.nats import NatsBroker
from pydantic import ValidationError

from echo_memory.libs.core.contracts.bus import Caller, Reply, Request
from echo_memory.libs.core.contracts.errors import BusTimeout, EchoError, Internal, Unavailable, from_info
from echo_memory.libs.core.contracts.subjects import request_subject
from echo_memory.libs.core.contracts.verbs import In, Out, Verb

BUS_DOWN = "the message bus (NATS) cannot be reached; retry once it is back"


def bus_connected(broker: NatsBroker) -> bool:
    """True while `broker` holds a live NATS connection (False before start, while reconnecting, after close)."""
    # FastStream sets _connection on connect and clears it on stop; nats-py tracks the live state.
    connection = getattr(broker, "_connection", None)
    return connection is not None and bool(connection.is_connected)


ErrorHook = Callable[[str, str, str], None]


class BusClient:
    """`on_error(service, verb, code)`, when given, hears of every call that ends in an error (metrics)."""

    def __init__(self, broker: NatsBroker, on_error: ErrorHook | None = None) -> None:
        self.broker = broker
        self.on_error = on_error

    async def call(self, verb: Verb[In, Out], args: In, *, caller: Caller, timeout: float) -> Out:
        """`verb`'s result for `args`, sent as `caller`, waiting at most `timeout` seconds.

        Only the fields set on `args` are sent, so the service fills every default exactly as it
        would for a caller that left them out. Raises the service's typed `EchoError`, `Unavailable`
        (no such service running, or the bus down), `BusTimeout`, or `Internal` when the reply is
        malformed or its result is not `verb.output`.
        """
        body = args.model_dump(mode="json", exclude_unset=True)
        result = await self.call_by_name(
            caller=caller, service=verb.service, verb=verb.name, args=body, timeout=timeout
        )
        try:
            return verb.output.model_validate(result)
        except ValidationError as exc:
            error = Internal(
                f"the {verb.service} service's result for {verb.name} is not a {verb.output.__name__}: "
                f"{exc.error_count()} field(s) do not validate"
            )
            self._heard(verb.service, verb.name, error)
            raise error from exc

    async def call_by_name(
        self, *, caller: Caller, service: str, verb: str, args: dict[str, Any], timeout: float
    ) -> dict[str, Any]:
        """The result of `service`'s `verb` as sent on the bus, for callers that hold only names and JSON.

        Arguments reach the service unchecked (it validates them); the result is not validated. Raises
        as `call` does, except that a well-formed reply is returned whatever its shape.
        """
        try:
            return await self._call(caller=caller, service=service, verb=verb, args=args, timeout=timeout)
        except EchoError as exc:
            self._heard(service, verb, exc)
            raise

    def _heard(self, service: str, verb: str, error: EchoError) -> None:
        if self.on_error is not None:
            self.on_error(service, verb, error.code)

    async def _call(
        self, *, caller: Caller, service: str, verb: str, args: dict[str, Any], timeout: float
    ) -> dict[str, Any]:
        subject = request_subject(caller.org, service, verb)
        try:
            message = await self.broker.request(
                Request(caller=caller, args=args), subject, timeout=timeout
            )
        except nats.errors.NoRespondersError as exc:
            raise Unavailable(
                f"no {service} service is running for org '{caller.org}'; retry once it is back"
            ) from exc
        except (TimeoutError, nats.errors.TimeoutError) as exc:
            if not bus_connected(self.broker):
                raise Unavailable(BUS_DOWN) from exc
            raise BusTimeout(
                f"the {service} service did not answer {verb} within {timeout:g} s; it may be down or overloaded"
            ) from exc
        except (nats.errors.ConnectionClosedError, nats.errors.NoServersError, nats.errors.StaleConnectionError,
                nats.errors.ConnectionReconnectingError, nats.errors.OutboundBufferLimitError) as exc:
            raise Unavailable(BUS_DOWN) from exc
        try:
            reply = Reply.model_validate_json(message.body)
        except ValueError as exc:
            raise Internal(f"the {service} service sent a malformed reply to {verb}") from exc
        if reply.ok and reply.result is not None:
            return reply.result
        if reply.error is not None:
            raise from_info(reply.error)
        raise Internal(f"the {service} service replied to {verb} with neither a result nor an error")


__all__ = ["BUS_DOWN", "BusClient", "EchoError", "bus_connected"]
