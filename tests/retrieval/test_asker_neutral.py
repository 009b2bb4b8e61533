"""Who asks does not change the answer: query_memory ranks what another agent or project wrote
exactly as it ranks the asker's own writes. A preference for the asker's writes would have to be
asked for; none is applied silently."""

from __future__ import annotations

from typing import Any

from echo_memory.libs.testing import EchoStack

# Three agents in three projects, each with a fact on the same subject (how deploys are rolled
# back), so a silent preference for the asker's own write would reorder them.
WRITES = [
    ("claude-code", "web", "web deploy", "Rollbacks of the web app redeploy the previous image tag."),
    ("codex", "billing", "billing deploy", "Billing rollbacks revert the release and replay the migration down step."),
    ("cursor", "infra", "infra deploy", "Infra rollbacks restore the last Terraform state snapshot."),
]
QUERIES = ["how do we roll back a bad deploy", "rollbacks", "what does a billing rollback do"]


def _episode(project: str, name: str, text: str) -> dict[str, Any]:
    return {"session_id": f"{project}-1", "project": project,
            "entities": [{"name": name, "type": "process"}, {"name": "rollback", "type": "procedure"}],
            "facts": [{"source": name, "target": "rollback", "relation": "is undone by", "fact": text,
                       "confidence": "extracted"}]}


async def _ranking(stack: EchoStack, agent: str, query: str) -> list[tuple[str, float, str]]:
    async with stack.client(stack.issue_token(agent)) as client:
        result = await client.call_tool("query_memory", {"query": query, "top_k": 10})
    answer = result.structured_content
    assert answer is not None, result
    return [(item["id"], item["score"], item["provenance"]["agent_id"]) for item in answer["results"]]


async def test_every_asker_gets_the_same_ranking_whoever_wrote_the_facts(stack: EchoStack) -> None:
    for agent, project, name, text in WRITES:
        async with stack.client(stack.issue_token(agent)) as client:
            written = (await client.call_tool("write_episode", _episode(project, name, text))).structured_content
        assert written is not None and written["stored"] is True, written
    for query in QUERIES:
        # The three writers and an agent that wrote nothing.
        rankings = {agent: await _ranking(stack, agent, query) for agent in ("claude-code", "codex", "cursor", "windsurf")}
        first = rankings["claude-code"]
        assert {writer for _, _, writer in first} >= {"claude-code", "codex", "cursor"}, (query, first)
        for agent, ranking in rankings.items():
            assert ranking == first, (query, agent)
    # The subject each query names comes first for every asker, its writer notwithstanding.
    billing = await _ranking(stack, "claude-code", "what does a billing rollback do")
    assert billing[0][2] == "codex"
