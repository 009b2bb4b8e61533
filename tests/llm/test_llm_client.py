"""The model client against a local stand-in of the chat-completions API: body, replies, and every failure typed."""

from __future__ import annotations

import json
import time

import pytest
from pydantic import BaseModel, ConfigDict, SecretStr

from echo_memory.libs.core.config.llm import LlmSettings
from echo_memory.libs.local.llm.client import ChatClient
from echo_memory.libs.local.llm.errors import (
    LlmHttpError,
    LlmMalformedReply,
    LlmNotConfigured,
    LlmRateLimited,
    LlmUnavailable,
)
from tests.llm.openai_stand_in import Answer, Received, rate_limited, serve


class Pair(BaseModel):
    model_config = ConfigDict(extra="forbid")
    left: str
    right: int


def settings(base_url: str, **extra: object) -> LlmSettings:
    values: dict[str, object] = {"api_key": SecretStr("sk-local"), "model": "stand-in-model", "base_url": base_url,
                                 "max_retry_wait_seconds": 0.05, **extra}
    return LlmSettings(**values)  # type: ignore[arg-type]


def test_no_key_or_no_model_is_refused_naming_the_variable_before_anything_is_sent() -> None:
    with pytest.raises(LlmNotConfigured, match="ECHO_MEMORY_LLM_API_KEY") as no_key:
        ChatClient(LlmSettings(model="m"))
    assert no_key.value.code == "invalid_argument" and not no_key.value.retryable
    with pytest.raises(LlmNotConfigured, match="ECHO_MEMORY_LLM_MODEL"):
        ChatClient(LlmSettings(api_key=SecretStr("sk-x")))


@pytest.mark.parametrize("url", ["http://models.example.com/v1", "ftp://127.0.0.1/v1", "not a url"])
def test_a_url_that_would_leak_the_key_or_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(LlmNotConfigured, match="ECHO_MEMORY_LLM_BASE_URL"):
        ChatClient(settings(url))


def test_plain_http_is_fine_for_this_machine_or_when_allowed() -> None:
    for url in ("http://localhost:11434/v1", "http://[::1]:8000/v1", "https://models.example.com/v1"):
        assert ChatClient(settings(url)).url == url + "/chat/completions"
    assert ChatClient(settings("http://models.example.com/v1", allow_plain_http=True)).model == "stand-in-model"


def test_the_variables_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ECHO_MEMORY_LLM_API_KEY", "sk-env")
    monkeypatch.setenv("ECHO_MEMORY_LLM_MODEL", "m-env")
    monkeypatch.setenv("ECHO_MEMORY_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    loaded = LlmSettings()
    assert loaded.api_key is not None and loaded.api_key.get_secret_value() == "sk-env"
    assert (loaded.model, loaded.base_url) == ("m-env", "http://127.0.0.1:9/v1")
    assert "sk-env" not in repr(loaded)


async def test_a_request_asks_for_the_schema_and_the_reply_is_validated() -> None:
    with serve(lambda r: Answer(content=json.dumps({"left": "a", "right": 2}))) as server:
        async with ChatClient(settings(server.base_url)) as chat:
            got = await chat.structured("system words", "user words", Pair)
    assert got == Pair(left="a", right=2)
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-local"
    body = request.body
    assert body["model"] == "stand-in-model" and body["temperature"] == 0
    assert [m["role"] for m in body["messages"]] == ["system", "user"] and request.user_text() == "user words"
    schema = body["response_format"]["json_schema"]
    assert body["response_format"]["type"] == "json_schema" and schema["name"] == "Pair" and schema["strict"] is True
    assert schema["schema"]["required"] == ["left", "right"] and schema["schema"]["additionalProperties"] is False


@pytest.mark.parametrize("content", ["not json at all", json.dumps({"left": "a"}), json.dumps([1, 2]),
                                     json.dumps({"left": "a", "right": 2, "extra": True})])
async def test_a_malformed_reply_is_a_typed_error(content: str) -> None:
    with serve(lambda r: Answer(content=content)) as server:
        async with ChatClient(settings(server.base_url)) as chat:
            with pytest.raises(LlmMalformedReply) as caught:
                await chat.structured("s", "u", Pair)
    assert caught.value.code == "llm_malformed_reply" and not caught.value.retryable


async def test_a_body_without_choices_is_malformed() -> None:
    with serve(lambda r: Answer(body={"object": "chat.completion", "choices": []})) as server:
        async with ChatClient(settings(server.base_url)) as chat:
            with pytest.raises(LlmMalformedReply):
                await chat.structured("s", "u", Pair)


async def test_429_is_retried_after_retry_after_then_succeeds() -> None:
    answers = iter([rate_limited("0"), rate_limited("0"), Answer(content=json.dumps({"left": "x", "right": 1}))])
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    with serve(lambda r: next(answers)) as server:
        async with ChatClient(settings(server.base_url), sleep=sleep) as chat:
            got = await chat.structured("s", "u", Pair)
            assert chat.requests == 3
    assert got.left == "x" and len(server.requests) == 3 and waits == [0.0, 0.0]


async def test_429_on_every_attempt_is_rate_limited_and_retryable() -> None:
    with serve(lambda r: rate_limited("7")) as server:
        async with ChatClient(settings(server.base_url, max_retries=2)) as chat:
            with pytest.raises(LlmRateLimited) as caught:
                await chat.structured("s", "u", Pair)
    assert caught.value.retryable and caught.value.code == "rate_limited" and caught.value.retry_after == 7.0
    assert len(server.requests) == 3  # the first try and two retries, each wait capped at 0.05 s


async def test_5xx_is_retried_then_unavailable_and_4xx_is_not_retried() -> None:
    with serve(lambda r: Answer(status=503, body={"error": {"message": "overloaded"}})) as server:
        async with ChatClient(settings(server.base_url, max_retries=1)) as chat:
            with pytest.raises(LlmUnavailable, match="HTTP 503") as down:
                await chat.structured("s", "u", Pair)
    assert down.value.retryable and len(server.requests) == 2

    def refuse(r: Received) -> Answer:
        return Answer(status=401, body={"error": {"message": "Incorrect API key provided"}})

    with serve(refuse) as server:
        async with ChatClient(settings(server.base_url, max_retries=3)) as chat:
            with pytest.raises(LlmHttpError, match="HTTP 401.*Incorrect API key") as refused:
                await chat.structured("s", "u", Pair)
    assert refused.value.status == 401 and not refused.value.retryable and len(server.requests) == 1
    assert "sk-local" not in refused.value.message


async def test_a_silent_endpoint_is_bounded_by_the_timeout() -> None:
    with serve(lambda r: Answer(content="{}", delay=3.0)) as server:
        async with ChatClient(settings(server.base_url, timeout_seconds=0.3, max_retries=0)) as chat:
            started = time.monotonic()
            with pytest.raises(LlmUnavailable, match="did not answer within 0.3 s"):
                await chat.structured("s", "u", Pair)
            assert time.monotonic() - started < 2.0


async def test_an_unreachable_endpoint_is_unavailable() -> None:
    with serve(lambda r: Answer(content="{}")) as server:
        url = server.base_url
    async with ChatClient(settings(url, max_retries=0)) as chat:
        with pytest.raises(LlmUnavailable, match="cannot be reached"):
            await chat.structured("s", "u", Pair)
