"""demo-seed's invented org stays out of the user's own figures: health, status and the dashboard's
default view leave the demo scope out unless asked, its agents are `demo-` names, and `--remove`
names the audited erasure instead of pretending to delete."""

from __future__ import annotations

import pytest

from echo_memory.libs.core.contracts.admin import StatusResult
from echo_memory.libs.local.cli.main import main
from echo_memory.libs.local.cli.system import render_store
from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import Writer, fact
from tests.dashboard.dashboard_support import seed
from tests.dashboard.test_dashboard_cli import run_cli

pytestmark = pytest.mark.timeout(240)


async def test_demo_scope_is_left_out_unless_asked(stack: EchoStack, embedder: MiniLM) -> None:
    async with stack.client(stack.issue_token("claude-code")) as c:
        await Writer(c).write([("API", "service"), ("Redis", "cache")],
                              [fact("API", "Redis", "caches in", "The API caches in Redis.")])
    counts = await seed(stack, embedder, facts=200, scope="demo")

    health = await stack.admin_call("audit", "health", {})
    assert health["figures"]["scopes"] == ["shared"]
    assert health["figures"]["facts"] == 1
    assert all(not w["agent_id"].startswith("demo-") for w in health["figures"]["writers"])
    with_demo = await stack.admin_call("audit", "health", {"include_demo": True})
    assert "demo" in with_demo["figures"]["scopes"] and with_demo["figures"]["facts"] == 1 + counts["fact"]
    writers = {w["agent_id"] for w in with_demo["figures"]["writers"]}
    assert writers - {"claude-code"} and all(a.startswith("demo-") for a in writers - {"claude-code"})

    default = await stack.admin_call("audit", "dashboard_graph", {})
    assert {n["scope"] for n in default["nodes"]} == {"shared"}
    asked = await stack.admin_call("audit", "dashboard_graph", {"include_demo": True})
    assert {n["scope"] for n in asked["nodes"]} == {"shared", "demo"}
    cost = await stack.admin_call("audit", "recall_cost", {})
    assert "demo" not in cost["scopes"]

    status = StatusResult.model_validate(await stack.admin_call("writes", "status", {}))
    shown = "\n".join(render_store(status))
    assert "scope shared:" in shown and "scope demo:" not in shown and "demo-ops-bot" not in shown
    assert "demo scopes not shown: demo" in shown
    assert "scope demo:" in "\n".join(render_store(status, include_demo=True))

    code, _, err = await run_cli(stack, "demo-seed", "--remove")
    assert code == 1 and "echo-memory forget --scope demo --confirm" in err
    after = StatusResult.model_validate(await stack.admin_call("writes", "status", {}))
    assert next(s for s in after.scopes if s.scope == "demo").facts == counts["fact"]  # --remove erased nothing

    code, out, _ = await run_cli(stack, "demo-seed", "--remove", "--scope", "demo-empty")
    assert code == 0 and "nothing to remove" in out


def test_demo_seed_refuses_a_real_looking_scope(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo-seed", "--scope", "team-a"]) == 2
    assert "must be demo or start with demo-" in capsys.readouterr().err
