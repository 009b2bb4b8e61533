"""The official MCP conformance suite (`@modelcontextprotocol/conformance`) against our HTTP edge.

Only the server scenarios that apply to a tool-only, token-protected server run here; the others
(and why) are listed in docs/clients.md. The runner gets our bearer token through a Node preload,
so every scenario exercises the authenticated edge exactly as a configured client would.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from edge_support import ConformanceRunner
from jsonschema import Draft202012Validator

from echo_memory.libs.testing import EchoStack

APPLICABLE = ("server-initialize", "ping", "tools-list", "logging-set-level", "dns-rebinding-protection")


async def _run_scenario(runner: ConformanceRunner, url: str, token: str, scenario: str, out: Path) -> list[dict]:
    env = {**os.environ, "ECHO_CONFORMANCE_TOKEN": token, "NO_COLOR": "1"}
    process = await asyncio.create_subprocess_exec(
        str(runner.node), "--import", str(runner.preload), str(runner.cli),
        "server", "--url", url, "--scenario", scenario, "-o", str(out),
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=120)
    checks_files = list(out.glob("**/checks.json"))
    assert checks_files, f"{scenario}: the suite wrote no checks.json\n{output.decode(errors='replace')[-3000:]}"
    checks: list[dict] = []
    for path in checks_files:
        checks += json.loads(path.read_text())
    return checks


@pytest.mark.parametrize("scenario", APPLICABLE)
async def test_the_edge_passes_the_applicable_conformance_scenario(
    stack: EchoStack, conformance_runner: ConformanceRunner, tmp_path: Path, scenario: str
) -> None:
    checks = await _run_scenario(
        conformance_runner, stack.url, stack.issue_token("conformance"), scenario, tmp_path / scenario
    )
    verdicts = [c for c in checks if c["status"] in ("SUCCESS", "FAILURE", "WARNING")]
    failed = [c for c in verdicts if c["status"] != "SUCCESS"]
    assert verdicts, f"{scenario}: no check reached a verdict: {checks}"
    assert not failed, json.dumps(failed, indent=2)[:4000]


async def test_the_suite_catches_an_edge_that_breaks_the_protocol(
    stack: EchoStack, conformance_runner: ConformanceRunner, tmp_path: Path
) -> None:
    """The harness itself can fail: a revoked token makes every scenario fail, not pass vacuously."""
    token = stack.issue_token("conformance")
    await stack.admin_call("writes", "token_revoke", {"agent_id": "conformance"})
    stack.edge.verifier.forget()
    checks = await _run_scenario(conformance_runner, stack.url, token, "ping", tmp_path / "ping")
    assert any(c["status"] == "FAILURE" for c in checks), checks


async def test_tool_schemas_are_valid_json_schema_2020_12_and_keep_their_keywords(stack: EchoStack) -> None:
    """The json-schema-2020-12 scenario needs a test-only tool; this is its applicable part for our tools."""
    async with stack.client(stack.issue_token("schema-check")) as client:
        tools = (await client.list_tools()).tools
    assert len(tools) == 10
    for tool in tools:
        Draft202012Validator.check_schema(tool.input_schema)
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema.get("additionalProperties") is False, tool.name  # unknown arguments refused
        assert tool.description and len(tool.description) > 40, tool.name
    write = next(t for t in tools if t.name == "write_episode")
    assert "$defs" in write.input_schema  # nested entity/fact models are kept, not flattened away
    Draft202012Validator(write.input_schema).validate(
        {"session_id": "s", "entities": [{"name": "A", "type": "service"}], "facts": []}
    )
