"""The one outbound request of Echo Memory: a chat completion at the user's own OpenAI-compatible endpoint.

Only `echo-memory distil`, `echo-memory infer-causal-hints` and `echo-memory judge-external --send`
construct a `ChatClient`, and only when the user runs them. Every request is bounded
(`LlmSettings.timeout_seconds`), asks for a JSON object matching a schema (OpenAI structured
output, `response_format: json_schema`), and its reply is validated by the pydantic model the
schema came from. A 429 or 5xx is retried after Retry-After (capped) a few times; then, like every
other failure, it is a typed error (libs/local/llm/errors.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx2
from pydantic import BaseModel, ValidationError

from echo_memory.libs.core.config.llm import API_KEY_VARIABLE, MODEL_VARIABLE, LlmSettings
from echo_memory.libs.local.llm.errors import (
    LlmHttpError,
    LlmMalformedReply,
    LlmNotConfigured,
    LlmRateLimited,
    LlmUnavailable,
)

Reply = TypeVar("Reply", bound=BaseModel)
Sleep = Callable[[float], Awaitable[None]]
SHOWN_BODY_CHARS = 300  # of an HTTP error's body, in the error message


LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def require_configured(settings: LlmSettings) -> tuple[str, str]:
    """(api key, model) when both are set and the URL keeps the key safe; LlmNotConfigured naming the variable otherwise.

    The key travels in a header, so a plain http:// URL is accepted only for this machine's own
    addresses unless ECHO_MEMORY_LLM_ALLOW_PLAIN_HTTP says otherwise.
    """
    parts = urlsplit(settings.base_url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise LlmNotConfigured(f"ECHO_MEMORY_LLM_BASE_URL {settings.base_url!r} is not an http(s) URL; nothing was sent")
    if parts.scheme == "http" and parts.hostname not in LOOPBACK and not settings.allow_plain_http:
        raise LlmNotConfigured(f"ECHO_MEMORY_LLM_BASE_URL {settings.base_url!r} would send your key unencrypted to "
                               f"{parts.hostname}: use https://, or set ECHO_MEMORY_LLM_ALLOW_PLAIN_HTTP=1; "
                               "nothing was sent")
    if settings.api_key is None or not settings.api_key.get_secret_value():
        raise LlmNotConfigured(f"no API key for your model: set {API_KEY_VARIABLE} (and {MODEL_VARIABLE}, "
                               "ECHO_MEMORY_LLM_BASE_URL for an endpoint other than OpenAI's); nothing was sent")
    if not settings.model:
        raise LlmNotConfigured(f"no model named: set {MODEL_VARIABLE} to a model your endpoint serves; nothing was sent")
    return settings.api_key.get_secret_value(), settings.model


def _retry_after(response: httpx2.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: treated as unknown, the backoff applies
        return None


def _shown(response: httpx2.Response) -> str:
    body = response.text
    return body if len(body) <= SHOWN_BODY_CHARS else f"{body[:SHOWN_BODY_CHARS]}… ({len(body)} characters)"


class ChatClient:
    """`async with ChatClient(settings) as chat: await chat.structured(system, user, ReplyModel)`."""

    def __init__(self, settings: LlmSettings, *, sleep: Sleep = asyncio.sleep) -> None:
        """Raises LlmNotConfigured when the key or the model is not set (nothing is sent then)."""
        self._key, self.model = require_configured(settings)
        self.settings = settings
        self.url = settings.base_url.rstrip("/") + "/chat/completions"
        self._sleep = sleep
        self._http: httpx2.AsyncClient | None = None
        self.requests = 0  # sent, retries included

    async def __aenter__(self) -> ChatClient:
        self._http = httpx2.AsyncClient(timeout=httpx2.Timeout(self.settings.timeout_seconds))
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def body(self, system: str, user: str, reply: type[BaseModel]) -> dict[str, Any]:
        """The request body: two messages, temperature 0, and the reply model's JSON schema as structured output."""
        return {
            "model": self.model,
            "temperature": 0,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "response_format": {"type": "json_schema", "json_schema": {
                "name": reply.__name__, "strict": True, "schema": reply.model_json_schema()}},
        }

    async def structured(self, system: str, user: str, reply: type[Reply]) -> Reply:
        """The model's answer validated as `reply`.

        Raises LlmMalformedReply (not JSON, not the schema, no content), LlmRateLimited (429 on every
        attempt), LlmUnavailable (unreachable, timed out, 5xx on every attempt), LlmHttpError (any
        other HTTP error status).
        """
        response = await self._send(self.body(system, user, reply))
        try:
            content = response.json()["choices"][0]["message"]["content"]
            if not isinstance(content, str):
                raise TypeError("message content is not text")
            return reply.model_validate(json.loads(content))
        except (ValueError, KeyError, IndexError, TypeError, ValidationError) as exc:
            raise LlmMalformedReply(f"the model's reply is not the JSON object asked for ({type(exc).__name__}: "
                                    f"{str(exc)[:200]})") from None

    async def _send(self, body: dict[str, Any]) -> httpx2.Response:
        assert self._http is not None, "use ChatClient inside `async with`"
        headers = {"Authorization": f"Bearer {self._key}", "Content-Type": "application/json"}
        attempt = 0
        while True:
            wait: float | None = None
            self.requests += 1
            try:
                response = await self._http.post(self.url, json=body, headers=headers)
            except httpx2.TimeoutException:
                failure: LlmRateLimited | LlmUnavailable = LlmUnavailable(
                    f"your model's endpoint did not answer within {self.settings.timeout_seconds:g} s")
            except httpx2.HTTPError as exc:
                failure = LlmUnavailable(f"your model's endpoint {self.settings.base_url} cannot be reached: "
                                         f"{type(exc).__name__}")
            else:
                if response.status_code < 400:
                    return response
                wait = _retry_after(response)
                if response.status_code == 429:
                    failure = LlmRateLimited(f"your model's endpoint is rate limiting (HTTP 429) after "
                                             f"{attempt + 1} attempt(s)", retry_after=wait)
                elif response.status_code >= 500:
                    failure = LlmUnavailable(f"your model's endpoint failed with HTTP {response.status_code}: "
                                             f"{_shown(response)}", retry_after=wait)
                else:
                    raise LlmHttpError(f"your model's endpoint refused the request with HTTP {response.status_code}: "
                                       f"{_shown(response)}", status=response.status_code)
            if attempt >= self.settings.max_retries:
                raise failure
            attempt += 1
            await self._sleep(min(wait if wait is not None else 2.0 ** attempt, self.settings.max_retry_wait_seconds))
