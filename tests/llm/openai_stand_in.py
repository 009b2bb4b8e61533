"""A local HTTP server speaking OpenAI's chat-completions API, standing in for the user's model provider.

The provider itself cannot be reached from the test machine. This is a real HTTP server on
127.0.0.1 (the standard library's, in a thread) that answers POST /v1/chat/completions the way
the API does: a JSON body with `choices[0].message.content`, or an error status with a JSON
error body. What it answers is decided by `respond(body)`, a function of the request body, so a
test scripts replies per episode or sentence, and every request it received is kept in `requests`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Answer:
    status: int = 200
    content: str | None = None  # the assistant message's content (a JSON text, or anything for a malformed reply)
    body: dict[str, Any] | None = None  # a whole body instead (errors, odd shapes)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering (time-out tests)


def completion(content: str, model: str = "stand-in-model") -> dict[str, Any]:
    """A chat.completion body as the API returns it."""
    return {"id": "chatcmpl-local", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content, "refusal": None}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def rate_limited(retry_after: str = "0") -> Answer:
    return Answer(status=429, headers={"Retry-After": retry_after},
                  body={"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}})


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    def user_text(self) -> str:
        return "\n".join(m["content"] for m in self.body.get("messages", []) if m.get("role") == "user")


class StandIn:
    """`with serve(respond) as server:` — `server.base_url` is what ECHO_MEMORY_LLM_BASE_URL points at."""

    def __init__(self, respond: Callable[[Received], Answer]) -> None:
        self.respond = respond
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the standard library's name
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                received = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw or b"{}"))
                with owner._lock:
                    owner.requests.append(received)
                if self.path != "/v1/chat/completions":
                    answer = Answer(status=404, body={"error": {"message": f"no route {self.path}"}})
                else:
                    answer = owner.respond(received)
                if answer.delay:
                    time.sleep(answer.delay)
                payload = answer.body if answer.body is not None else completion(answer.content or "")
                data = json.dumps(payload).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a time-out test)
                    pass

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet test output
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@contextmanager
def serve(respond: Callable[[Received], Answer]) -> Iterator[StandIn]:
    stand_in = StandIn(respond)
    thread = threading.Thread(target=stand_in.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        stand_in.server.shutdown()
        stand_in.server.server_close()
        thread.join(timeout=5)


def llm_env(stand_in: StandIn, key: str = "sk-test-local") -> dict[str, str]:
    """The ECHO_MEMORY_LLM_* variables that point the commands at the stand-in."""
    return {"ECHO_MEMORY_LLM_API_KEY": key, "ECHO_MEMORY_LLM_MODEL": "stand-in-model",
            "ECHO_MEMORY_LLM_BASE_URL": stand_in.base_url, "ECHO_MEMORY_LLM_MAX_RETRY_WAIT_SECONDS": "0.2"}
