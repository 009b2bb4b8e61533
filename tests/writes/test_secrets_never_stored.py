"""Every write path refuses a secret in any field it stores, and the rows hold no trace of it (handler tier)."""

from __future__ import annotations

import pytest

from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.testing.agents import Agent
from echo_memory.libs.testing.tiers import Handlers
from tests.writes.conftest import PAYMENTS, call, counts, episode, fact, sql

# Built from parts so no file holds a literal a scanner would flag; the formats are real, the values fake.
NPM = "np" + "m_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
HF = "h" + "f_" + "Zq8wX2cV4bN6mK8jH0gF2dS4aP6oI8uY0t"
AWS = "AK" + "IA" + "Q7W2E5R8T1Y4U6I9"
FULLWIDTH_AWS = "".join(chr(ord(c) + 0xFEE0) for c in AWS)
ZERO_WIDTH_NPM = "\u200b".join(NPM)


async def test_write_episode_refuses_a_secret_in_the_idempotency_key_and_stores_nothing(handlers: Handlers) -> None:
    before = await counts(handlers.conn)
    client = Agent(handlers, "claude-code")
    is_error, result = await call(client, "write_episode", {**PAYMENTS, "idempotency_key": f"retry-{NPM}"})
    assert is_error and result["not_stored"] == "refused"
    assert result["error"]["code"] == "invalid_argument"
    assert "idempotency_key contains an npm token" in result["error"]["message"]
    assert NPM not in result["error"]["message"]
    assert await counts(handlers.conn) == before
    assert await sql(handlers.conn, "SELECT count(*) FROM idempotency") == [(0,)]


@pytest.mark.parametrize("disguised", [FULLWIDTH_AWS, ZERO_WIDTH_NPM, " ".join(AWS)])
async def test_write_episode_refuses_a_disguised_secret_in_a_fact(handlers: Handlers, disguised: str) -> None:
    args = episode([("CI", "system"), ("Registry", "service")],
                   [fact("CI", "Registry", "publishes with", f"CI publishes with {disguised}")])
    client = Agent(handlers, "claude-code")
    is_error, result = await call(client, "write_episode", args)
    assert is_error and result["not_stored"] == "refused"
    assert "fact 1 (fact) contains" in result["error"]["message"]
    assert (await counts(handlers.conn))["facts"] == 0


async def test_record_recall_save_refuses_a_newer_kind_in_the_note(handlers: Handlers) -> None:
    client = Agent(handlers, "claude-code")
    _, written = await call(client, "write_episode", PAYMENTS)
    _, read = await call(client, "query_memory", {"query": "how are cards charged?"})
    fact_id = written["edges_created"][0]["fact_id"]
    is_error, result = await call(client, "record_recall_save",
                                  {"fact_id": fact_id, "read_id": read["read_id"], "note": f"used {HF}"})
    assert is_error and result["error"]["code"] == "invalid_argument"
    assert "note contains a Hugging Face token" in result["error"]["message"]
    assert await sql(handlers.conn, "SELECT count(*) FROM recall_saves") == [(0,)]


async def test_register_documents_refuses_a_secret_in_the_content_or_the_path(handlers: Handlers) -> None:
    result = await handlers.admin_call("writes", "register_documents", {"project": "p", "documents": [
        {"path": "CLAUDE.md", "content": f"publish with {ZERO_WIDTH_NPM}"},
        {"path": f"keys/{AWS}.md", "content": "nothing secret here"},
        {"path": "README.md", "content": "the key is in the team vault"},
    ]})
    statuses = [(d["path"], d["status"]) for d in result["documents"]]
    assert statuses == [("CLAUDE.md", "refused"), (f"keys/{AWS}.md", "refused"), ("README.md", "new")]
    assert "an npm token" in result["documents"][0]["reason"]
    assert await sql(handlers.conn, "SELECT path FROM documents") == [("README.md",)]


@pytest.mark.parametrize("field", ["content", "speaker", "session_id", "project", "metadata"])
async def test_import_episodes_refuses_a_secret_in_any_stored_field(handlers: Handlers, field: str) -> None:
    clean = {"content": "Alice: the deploy went fine", "speaker": "Alice", "session_id": "s", "project": "p",
             "metadata": {"source": "slack"}}
    value: object = {"notes": [f"token {NPM}"]} if field == "metadata" else f"see {NPM}"
    episodes = [clean, {**clean, field: value}]
    with pytest.raises(InvalidArgument) as caught:
        await handlers.admin_call("writes", "import_episodes", {"episodes": episodes})
    assert f"episode 2 ({field}) contains an npm token" in caught.value.message
    assert NPM not in caught.value.message
    assert await sql(handlers.conn, "SELECT count(*) FROM episodes") == [(0,)]
