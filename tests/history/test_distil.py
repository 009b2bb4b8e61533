"""Imported turns become facts through the agent: pending_episodes, write_episode provenance, mark_distilled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from echo_memory.libs.core.contracts.framing import OPEN_TAG
from echo_memory.libs.testing import EchoStack, tool_error
from tests.history.history_fixtures import install
from tests.history.test_history_import import env_for, run


def fact_from(episode_id: str | None) -> dict[str, Any]:
    call: dict[str, Any] = {
        "session_id": "distil-1", "project": "app",
        "entities": [{"name": "webhook sender", "type": "component"}, {"name": "retry policy", "type": "decision"}],
        "facts": [{"source": "webhook sender", "target": "retry policy", "relation": "uses",
                   "fact": "The webhook sender retries three times with backoff.", "confidence": "extracted"}],
    }
    if episode_id is not None:
        call["source_episode_ids"] = [episode_id]
    return call


async def test_an_agent_distils_imported_turns_into_facts_that_lead_back_to_them(stack: EchoStack, tmp_path: Path) -> None:
    install(tmp_path, ("codex",))
    code, _, err = await run(env_for(stack, tmp_path))
    assert code == 0, err

    async with stack.client(stack.issue_token("distiller")) as client:
        assert "pending_episodes" in (client.instructions or "") and "mark_distilled" in (client.instructions or "")
        listed = await client.call_tool("pending_episodes", {})
        assert not listed.is_error, listed.content
        episodes = listed.structured_content["episodes"]
        assert len(episodes) == 3 and {e["agent_id"] for e in episodes} == {"codex"}
        assert {e["project"] for e in episodes} == {"app"} and listed.content[0].text.count(OPEN_TAG) == 1
        for filters, expected in (({"project": "app"}, 3), ({"project": "other"}, 0), ({"source": "codex"}, 3),
                                  ({"source": "cursor"}, 0)):
            got = await client.call_tool("pending_episodes", filters)
            assert len(got.structured_content["episodes"]) == expected, filters

        page1 = await client.call_tool("pending_episodes", {"limit": 2})
        cursor = page1.structured_content["next_cursor"]
        page2 = await client.call_tool("pending_episodes", {"limit": 2, "cursor": cursor})
        ids = [e["episode_id"] for e in page1.structured_content["episodes"] + page2.structured_content["episodes"]]
        assert ids == [e["episode_id"] for e in episodes] and page2.structured_content["next_cursor"] is None

        webhook = next(e for e in episodes if "webhook" in e["content"])
        written = await client.call_tool("write_episode", fact_from(webhook["episode_id"]))
        assert not written.is_error and written.structured_content["stored"], written.content
        fact_id = written.structured_content["edges_created"][0]["fact_id"]

        missing = await client.call_tool("write_episode", fact_from("00000000-0000-4000-8000-000000000000"))
        assert tool_error(missing)["code"] == "not_found"

        marked = await client.call_tool("mark_distilled", {"episode_ids": [webhook["episode_id"]],
                                                           "fact_ids": [fact_id]})
        assert marked.structured_content == {"marked": [webhook["episode_id"]], "already": []}, marked.content
        again = await client.call_tool("mark_distilled", {"episode_ids": [webhook["episode_id"]]})
        assert again.structured_content == {"marked": [], "already": [webhook["episode_id"]]}
        left = await client.call_tool("pending_episodes", {})
        assert webhook["episode_id"] not in [e["episode_id"] for e in left.structured_content["episodes"]]
        assert len(left.structured_content["episodes"]) == 2

        log = await client.call_tool("get_audit_log", {"fact_id": fact_id})
        created = next(e for e in log.structured_content["entries"] if e["kind"] == "fact_created")
        assert created["after"]["source_episode_ids"] == [webhook["episode_id"]]

    why = await stack.admin_call("audit", "why", {"fact_id": fact_id})
    assert any(webhook["episode_id"] in a["reason"] for a in why["audit"]), why["audit"]

    # An agent that cannot read the shared scope sees none of it and cannot name its episodes.
    async with stack.client(stack.issue_token("outsider", read=["solo"], write=["solo"])) as client:
        hidden = await client.call_tool("pending_episodes", {})
        assert hidden.structured_content["episodes"] == []
        refused = await client.call_tool("mark_distilled", {"episode_ids": [episodes[1]["episode_id"]]})
        assert tool_error(refused)["code"] == "not_found"
        cited = await client.call_tool("write_episode", {**fact_from(episodes[1]["episode_id"]), "scope": "solo"})
        assert tool_error(cited)["code"] == "not_found"
