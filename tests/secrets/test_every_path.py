"""Every path that stores text refuses or redacts a password written in a sentence, through the
shared detector: write_episode, record_recall_save, register_documents and import_episodes refuse;
the history importer and the capture hook redact before storing; distil drops the candidate; the
read log stores the query redacted. Each test checks the database holds no trace of the value.

The services' paths run on the handler tier: the calls an agent or the CLI makes, answered on one
connection that then reads every table.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.local.cli.hook_commands import episode_of as hook_episode
from echo_memory.libs.local.history.engine import SourceReport
from echo_memory.libs.local.history.engine import episode_of as history_episode
from echo_memory.libs.local.history.turns import Turn
from echo_memory.libs.local.llm.distil import DistilEntity, DistilFact, DistilReply, plan
from echo_memory.libs.local.llm.jobs import Report
from echo_memory.libs.testing.agents import PAYMENTS, Agent, call, episode, fact
from echo_memory.libs.testing.rows import counts, sql
from echo_memory.libs.testing.tiers import Handlers
from tests.secrets.corpus import password

PHRASINGS = {
    "en": "log in to staging with password {p}",
    "en-apposition": "the staging DB password, {p}, rotates monthly",
    "en-login": "staging login: admin / {p}",
    "de": "Das Passwort für den Staging-Server ist {p}.",
    "fr": "Le mot de passe du serveur de staging est {p}.",
    "es": "La contraseña del servidor de pruebas es {p}.",
    "zh": "测试服务器的密码是{p}，每月更换。",
    "ja": "ステージングのパスワードは{p}です。",
}


def sentence(language: str) -> tuple[str, str]:
    value = password()
    return PHRASINGS[language].format(p=value), value


async def stored_text(database: str | psycopg.AsyncConnection) -> str:
    """Every row of every table that holds text, as one string."""
    rows: list[Any] = []
    for table in ("facts", "entities", "entity_aliases", "episodes", "audit_log", "documents", "recall_saves",
                  "reads", "outbox", "idempotency"):
        rows += await sql(database, f"SELECT to_jsonb(t)::text FROM {table} t")  # noqa: S608 - fixed names
    return json.dumps([r[0] for r in rows], ensure_ascii=False)


@pytest.mark.parametrize("language", list(PHRASINGS))
async def test_write_episode_refuses_a_password_in_a_sentence(handlers: Handlers, language: str) -> None:
    text, value = sentence(language)
    args = episode([("Staging", "environment"), ("Ops", "team")], [fact("Ops", "Staging", "logs in to", text)])
    client = Agent(handlers, "claude-code")
    is_error, result = await call(client, "write_episode", args)
    assert is_error and result["not_stored"] == "refused"
    assert "fact 1 (fact) contains a password in prose" in result["error"]["message"]
    assert value not in json.dumps(result, ensure_ascii=False)
    assert sum((await counts(handlers.conn)).values()) == 0


async def test_record_recall_save_refuses_and_the_read_log_redacts(handlers: Handlers) -> None:
    text, value = sentence("en")
    client = Agent(handlers, "claude-code")
    _, written = await call(client, "write_episode", PAYMENTS)
    _, read = await call(client, "query_memory", {"query": f"how are cards charged? {text}"})
    is_error, result = await call(client, "record_recall_save", {
        "fact_id": written["edges_created"][0]["fact_id"], "read_id": read["read_id"], "note": text})
    assert is_error and "note contains a password in prose" in result["error"]["message"]
    assert await sql(handlers.conn, "SELECT count(*) FROM recall_saves") == [(0,)]
    queries = await sql(handlers.conn, "SELECT query FROM reads")
    assert len(queries) == 1 and "[redacted password in prose]" in queries[0][0]
    assert value not in await stored_text(handlers.conn)


async def test_register_documents_refuses_a_document_with_a_password_in_a_sentence(handlers: Handlers) -> None:
    text, value = sentence("de")
    result = await handlers.admin_call("writes", "register_documents", {"project": "p", "documents": [
        {"path": "RUNBOOK.md", "content": f"# Staging\n\n{text}\n"},
        {"path": "README.md", "content": "Rotate the password monthly; the policy requires 12 characters."},
    ]})
    assert [(d["path"], d["status"]) for d in result["documents"]] == [("RUNBOOK.md", "refused"), ("README.md", "new")]
    assert "a password in prose" in result["documents"][0]["reason"]
    assert await sql(handlers.conn, "SELECT path FROM documents") == [("README.md",)]
    assert value not in await stored_text(handlers.conn)


async def test_import_episodes_refuses_a_turn_with_a_password_in_a_sentence(handlers: Handlers) -> None:
    text, value = sentence("fr")
    with pytest.raises(InvalidArgument) as caught:
        await handlers.admin_call("writes", "import_episodes", {"episodes": [
            {"content": "Alice: the deploy went fine", "session_id": "s"}, {"content": text, "session_id": "s"}]})
    assert "episode 2 (content) contains a password in prose" in caught.value.message
    assert value not in caught.value.message
    assert await sql(handlers.conn, "SELECT count(*) FROM episodes") == [(0,)]


async def test_the_history_importer_redacts_the_password_and_keeps_the_turn(handlers: Handlers) -> None:
    text, value = sentence("es")
    token = "np" + "m_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    turn = Turn(source="codex", conversation="c-1", first_message_id="m1", last_message_id="m2",
                user=f"{text} and publish with {token}", started_at=1_760_000_000.0, ended_at=1_760_000_010.0,
                reply="Done: logged in and published.", complete=True)
    report = SourceReport(source="codex")
    entry = history_episode(turn, report)
    assert entry is not None and report.refused == 0 and report.secrets_redacted == 2
    assert value not in entry["content"] and token not in entry["content"]
    assert "[redacted password in prose]" in entry["content"] and "Done: logged in" in entry["content"]
    await handlers.admin_call("writes", "import_episodes", {"episodes": [entry]})
    stored = await sql(handlers.conn, "SELECT content FROM episodes")
    assert len(stored) == 1 and "[redacted password in prose]" in stored[0][0]
    assert value not in await stored_text(handlers.conn)


async def test_the_capture_hook_redacts_the_password_before_storing(handlers: Handlers) -> None:
    text, value = sentence("zh")
    entry = hook_episode({"prompt": text, "response": "好的，已登录。", "client": "claude-code", "session_id": "s-9",
                          "at": 1_760_000_000})
    assert value not in entry["content"] and "[redacted password in prose]" in entry["content"]
    await handlers.admin_call("writes", "import_episodes", {"episodes": [entry]})
    assert len(await sql(handlers.conn, "SELECT content FROM episodes")) == 1
    assert value not in await stored_text(handlers.conn)


def test_distil_drops_a_candidate_fact_that_holds_a_password_in_a_sentence() -> None:
    from tests.llm.test_candidate_checks import QUOTE
    from tests.llm.test_candidate_checks import episode as pending

    text, _ = sentence("ja")
    entities = [DistilEntity(name="queue", type="component"), DistilEntity(name="NATS", type="service")]
    candidates = [DistilFact(source="queue", target="NATS", relation=relation, fact=claim, confidence="extracted",
                             quote=QUOTE) for relation, claim in (("moved to", "The queue moved to NATS."),
                                                                  ("logs in with", text))]
    report = Report(command="distil", write=False)
    args = plan(pending(), DistilReply(entities=entities, facts=candidates), report)
    assert args is not None and [f.fact for f in args.facts] == ["The queue moved to NATS."]
    assert report.dropped == {"holds a secret": 1}
