"""`echo-memory token …` and `echo-memory scope …` as an administrator runs them, against a running stack."""

from __future__ import annotations

import asyncio
import os
import re
import sys

import pytest

from echo_memory.libs.testing import EchoStack

pytestmark = pytest.mark.timeout(300)


async def run_cli(stack: EchoStack, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "ECHO_MEMORY_NATS_URL": stack.nats_url, "ECHO_MEMORY_ORG": stack.org}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "echo_memory.libs.local.cli", *args, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_an_administrator_manages_scopes_and_tokens(stack: EchoStack) -> None:
    code, out, err = await run_cli(stack, "token", "list")
    assert code == 0, err
    assert out.splitlines() == ["no tokens; issue one with `echo-memory token create --agent NAME`"]

    code, out, err = await run_cli(stack, "token", "create", "--agent", "cursor", "--read", "shared,team-a")
    assert code == 1 and "echo-memory scope create team-a" in err and "Traceback" not in err

    assert (await run_cli(stack, "scope", "create", "team-a", "--description", "Team A notes"))[0] == 0
    code, out, err = await run_cli(stack, "token", "create", "--agent", "cursor", "--read", "shared", "--write", "shared")
    assert code == 0, err
    token_id = re.search(r"\(id ([0-9a-f-]{36})\)", out).group(1)  # type: ignore[union-attr]

    code, out, err = await run_cli(stack, "token", "list")
    header, *rows = out.splitlines()
    assert header.split() == ["ID", "PREFIX", "AGENT", "READ", "WRITE", "STATE"]
    assert len(rows) == 1 and rows[0].startswith(token_id) and "cursor" in rows[0] and rows[0].endswith("active")

    code, out, err = await run_cli(stack, "token", "grant", "--id", token_id, "--read", "team-a", "--write", "team-a")
    assert code == 0, err
    assert "may now also read team-a and write team-a" in out

    code, out, err = await run_cli(stack, "scope", "show", "team-a")
    assert code == 0, err
    assert "readers: *" in out
    assert re.search(rf"{token_id}\s+cursor\s+yes\s+yes", out), out

    code, out, err = await run_cli(stack, "scope", "list")
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["NAME", "KIND", "FACTS", "ACTIVE"]
    team = next(line for line in lines if line.startswith("team-a "))
    assert team.split()[1:5] == ["named", "0", "0", "0"] and team.endswith("Team A notes")

    await stack.admin_call("writes", "write_episode", {
        "scope": "team-a", "session_id": "s-cli",
        "entities": [{"name": "Billing API", "type": "service"}, {"name": "Postgres", "type": "database"}],
        "facts": [{"source": "Billing API", "target": "Postgres", "relation": "stores invoices in",
                   "fact": "The billing API stores invoices in Postgres.", "confidence": "extracted"}]})
    code, out, err = await run_cli(stack, "scope", "delete", "team-a")
    assert code == 1 and "echo-memory forget --scope team-a --confirm" in err
    code, out, err = await run_cli(stack, "scope", "delete", "team-a", "--erase")
    assert code == 1 and "echo-memory forget --scope team-a --confirm" in err and "does not erase" in err
    assert "team-a " in (await run_cli(stack, "scope", "list"))[1]  # neither call changed anything

    assert (await run_cli(stack, "scope", "create", "scratch"))[0] == 0
    code, out, err = await run_cli(stack, "scope", "delete", "scratch")
    assert code == 0 and "scope 'scratch' deleted" in out, err
    assert "scratch" not in (await run_cli(stack, "scope", "list"))[1]

    code, out, err = await run_cli(stack, "token", "revoke", "--id", "nope")
    assert code == 1 and "not a token id" in err and "Traceback" not in err and "psycopg" not in err


async def test_consolidate_prints_each_run_with_the_pages_it_read_back_into_the_cache(stack: EchoStack) -> None:
    async with stack.client(stack.issue_token("codex")) as client:
        written = (await client.call_tool("write_episode", {
            "session_id": "s-cli", "entities": [{"name": "Ledger service", "type": "service"},
                                                {"name": "Postgres", "type": "database"}],
            "facts": [{"source": "Ledger service", "target": "Postgres", "relation": "stores in",
                       "fact": "The ledger service stores entries in Postgres.", "confidence": "extracted"}],
        })).structured_content
    assert written is not None and written["stored"] is True

    code, out, err = await run_cli(stack, "consolidate", "--scope", "shared")
    assert code == 0, err
    [line] = out.splitlines()
    assert re.match(r"shared: run [0-9a-f-]{36} \(policy v\d+\): hot \d+, .*; \d+ skipped, \d+ failed; "
                    r"[1-9]\d* pages of the hot search read back into the buffer cache$", line), line

    code, out, err = await run_cli(stack, "consolidate", "--scope", "shared", "--dry-run")
    assert code == 0, err
    assert "buffer cache" not in out and out.splitlines()[-1].startswith("nothing was changed")
