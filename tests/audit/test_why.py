"""why: the whole trail of one fact — versions, entities, reads, saves — from the audit service's verb and the real CLI.

The trail compares versions' times, so it runs on every service's routes with each request
committing; the refusals run on the handler tier, and the CLI on the full stack.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from audit_helpers import Writer, fact

from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import Agent, Answers, Routes, caller
from echo_memory.libs.testing.tiers import Handlers

EDGE = [("Billing API", "service"), ("Postgres", "database")]
TEXTS = [
    "The billing API stores invoices in Postgres.",
    "The billing API stores invoices and refunds in Postgres.",
    "The billing API stores invoices, refunds and payouts in Postgres 16.",
]


async def three_versions_two_reads_a_save(a: Writer, b: Writer) -> dict[str, Any]:
    """Claude-code (`a`) and cursor (`b`) write three versions of one fact, both read it, `a` saves it."""
    ids = []
    for i, text in enumerate(TEXTS):
        writer = a if i != 1 else b
        written = await writer.write(EDGE, [fact("Billing API", "Postgres", "stores data in", text)],
                                     session=f"s-{i}")
        assert written["stored"], written
        ids.append(written["edges_created"][0]["fact_id"])
    first_read = await a.query("where does billing keep refunds?")
    second_read = await b.query("which database holds payouts?")
    for read in (first_read, second_read):
        assert read["results"][0]["id"] == ids[2], read
    saved = await a.save(ids[2], first_read["read_id"], "told me payouts live in Postgres")
    return {"ids": ids, "reads": [first_read["read_id"], second_read["read_id"]], "save": saved}


def writers(answers: Answers) -> tuple[Writer, Writer]:
    return Writer(Agent(answers, "claude-code")), Writer(Agent(answers, "cursor"))


async def test_why_shows_every_version_entity_resolution_read_and_save(routes: Routes) -> None:
    made = await three_versions_two_reads_a_save(*writers(routes))
    ids = made["ids"]
    trail = await routes.admin_call("audit", "why", {"fact_id": ids[1]})

    assert trail["fact_id"] == ids[1] and trail["scope"] == "shared"
    assert [v["fact_id"] for v in trail["versions"]] == ids
    assert [v["text"] for v in trail["versions"]] == TEXTS
    assert [v["is_asked"] for v in trail["versions"]] == [False, True, False]
    assert [v["supersedes"] for v in trail["versions"]] == [None, ids[0], ids[1]]
    assert trail["versions"][0]["provenance"]["valid_until"] == trail["versions"][1]["provenance"]["valid_from"]
    assert trail["versions"][2]["provenance"]["valid_until"] is None
    written = trail["written_by"]
    assert (written["agent_id"], written["session_id"], written["project"]) == ("cursor", "s-1", "ops")
    assert written["tool"] == "pytest"  # the client's name the edge passes on, recorded as provenance

    roles = {e["role"]: e for e in trail["entities"]}
    assert (roles["source"]["name"], roles["target"]["name"]) == ("Billing API", "Postgres")
    assert roles["source"]["created_by"] == "claude-code"
    hows = [(r["kind"], (r["after"] or {}).get("how"), r["agent_id"]) for r in roles["target"]["resolutions"]]
    assert hows[0][0] == "entity_created"
    assert ("entity_resolved", "exact", "cursor") in hows  # cursor's write found it by exact name

    assert sorted(r["read_id"] for r in trail["reads"]) == sorted(made["reads"])
    assert {r["fact_id"] for r in trail["reads"]} == {ids[2]} and {r["rank"] for r in trail["reads"]} == {1}
    assert [(s["fact_id"], s["read_id"], s["agent_id"]) for s in trail["saves"]] == [
        (ids[2], made["reads"][0], "claude-code")]
    kinds = [a["kind"] for a in trail["audit"]]
    assert kinds.count("fact_superseded") == 2 and "fact_created" in kinds and "recall_saved" in kinds


async def test_the_why_command_prints_the_trail(stack: EchoStack) -> None:
    async with stack.client(stack.issue_token("claude-code")) as c, stack.client(stack.issue_token("cursor")) as d:
        made = await three_versions_two_reads_a_save(Writer(c), Writer(d))
    env = {**os.environ, "ECHO_MEMORY_NATS_URL": stack.nats_url, "ECHO_MEMORY_ORG": stack.org}
    cli = [sys.executable, "-m", "echo_memory.libs.local.cli"]
    proc = await asyncio.create_subprocess_exec(*cli, "why", made["ids"][2], env=env, cwd=Path(__file__).parents[2],
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    text = out.decode()
    assert proc.returncode == 0, err.decode()
    assert f"fact {made['ids'][2]} (scope shared)" in text
    assert "versions (3, oldest first):" in text and text.count("<- this fact") == 1
    assert "reads that returned it (2):" in text and "saves (1):" in text
    assert "told me payouts live in Postgres" in text and "entity_resolved (exact) by cursor" in text

    proc = await asyncio.create_subprocess_exec(*cli, "why", "00000000-0000-0000-0000-000000000000", env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    assert proc.returncode == 1 and "not_found" in err.decode()


async def test_why_refuses_unknown_malformed_and_unreadable_ids_with_typed_errors(handlers: Handlers) -> None:
    solo = await Writer(Agent(handlers, "claude-code")).write(
        [("Diary", "doc"), ("Hunch", "idea")], [fact("Diary", "Hunch", "records", "My diary records a hunch.")], scope="solo")
    solo_id = solo["edges_created"][0]["fact_id"]

    async def why_as(agent: str, fact_id: str) -> dict[str, Any]:
        who = caller(handlers.org, agent, read=["shared", "solo"], write=[])
        return await handlers.call(who, "audit", "why", {"fact_id": fact_id})

    assert (await why_as("claude-code", solo_id))["scope"] == "solo"
    cases = [("cursor", solo_id, "not_found"), ("cursor", "00000000-0000-0000-0000-000000000000", "not_found"),
             ("cursor", "'; DROP TABLE facts; --", "invalid_argument"), ("cursor", "", "invalid_argument")]
    for agent, fact_id, code in cases:
        with pytest.raises(EchoError) as caught:
            await why_as(agent, fact_id)
        assert caught.value.code == code and not caught.value.retryable, (fact_id, caught.value.message)


async def test_saves_and_documents_leave_their_audit_rows(handlers: Handlers) -> None:
    made = await three_versions_two_reads_a_save(*writers(handlers))
    registered = await handlers.admin_call("writes", "register_documents", {
        "project": "ops", "documents": [{"path": "docs/runbook.md", "content": "# Runbook\nRestart the API."}]})
    document_id = registered["documents"][0]["document_id"]
    c = Agent(handlers, "codex")
    ingested = await c.call_tool("mark_ingested", {"document_id": document_id})
    assert not ingested.is_error, ingested.content
    log = await Writer(c).audit(limit=1000)
    rows = {e["kind"]: e for e in log["entries"]}
    assert rows["recall_saved"]["fact_id"] == made["ids"][2] and rows["recall_saved"]["agent_id"] == "claude-code"
    assert rows["document_registered"]["scope"] is None and rows["document_registered"]["agent_id"] == "admin"
    assert rows["document_ingested"]["after"]["document_id"] == document_id
    assert rows["document_ingested"]["agent_id"] == "codex"
    assert json.dumps(log)  # plain JSON all the way through
