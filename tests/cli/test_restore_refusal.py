"""A refused restore names the command the user ran, `restore`.

In-process stack (real Postgres and NATS): the CLI's own export and restore code drives the verbs.
The handler tier's single rolled-back transaction cannot serve this: an export there misses the
facts its own transaction wrote (its snapshot time is the transaction's start).
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.local.cli.audit_commands import admin_session, export_to, import_lines
from echo_memory.libs.testing import EchoStack

WRITE = {
    "session_id": "restore-refusal",
    "entities": [{"name": "Release train", "type": "process"}, {"name": "Thursday", "type": "time"}],
    "facts": [{"source": "Release train", "target": "Thursday", "relation": "ships on",
               "fact": "The release train ships every Thursday afternoon.", "confidence": "extracted"}],
}


async def test_restore_into_a_scope_holding_memory_says_restore(stack: EchoStack) -> None:
    async with stack.client(stack.issue_token("alice")) as client:
        written = await client.call_tool("write_episode", WRITE)
        assert not written.is_error, written.content
    settings = Settings(org=stack.org, nats_url=stack.nats_url)
    out = io.StringIO()
    async with admin_session(settings) as call:
        await export_to(call, out, scope="shared", progress=None, timeout=30)
        lines: list[dict[str, Any]] = [json.loads(line) for line in out.getvalue().splitlines()]
        with pytest.raises(EchoError) as caught:
            await import_lines(call, lines, scope=None, progress=None, timeout=30)
    assert caught.value.code == "invalid_argument"
    message = caught.value.message
    assert "already holds memory" in message and "`echo-memory restore`" in message
    assert "import restores" not in message
