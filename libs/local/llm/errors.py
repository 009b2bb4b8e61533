"""Typed errors of the model client: each says what happened and whether trying again can help.

    LlmNotConfigured    invalid_argument   no    set the variable the sentence names
    LlmHttpError        llm_http_error     no    the endpoint refused the request (bad key, model, URL)
    LlmUnavailable      unavailable        yes   the endpoint cannot be reached, timed out or failed (5xx)
    LlmRateLimited      rate_limited       yes   HTTP 429 after every retry; wait `retry_after` seconds
    LlmMalformedReply   llm_malformed_reply no   the reply is not the JSON asked for; it is dropped, never stored
"""

from __future__ import annotations

from echo_memory.libs.core.contracts.errors import EchoError, InvalidArgument, RateLimited, Unavailable


class LlmNotConfigured(InvalidArgument):
    """A setting the commands need is missing; nothing was sent."""


class LlmHttpError(EchoError):
    """The endpoint answered with an HTTP error other than 429 or 5xx."""

    code = "llm_http_error"

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class LlmUnavailable(Unavailable):
    """No answer: the connection failed, the request timed out, or the endpoint failed (5xx)."""


class LlmRateLimited(RateLimited):
    """HTTP 429 on every attempt."""


class LlmMalformedReply(EchoError):
    """The reply is not a chat completion holding the JSON object the request's schema asks for."""

    code = "llm_malformed_reply"
