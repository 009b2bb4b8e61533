"""Nothing but the two opt-in commands reaches the user's model: writes, migrations, import and hooks never do.

Statically, an import-linter contract (pyproject.toml) forbids every service, the store, history
import, the hook runtime and every other CLI module from importing echo_memory.libs.local.llm. Here, at run time:
with the model variables pointing at a local stand-in of the API, a fresh process that loads
every service, applies the migrations, reads agent history and runs a hook has not loaded echo_memory.libs.local.llm,
and the real stack's writes, an `echo-memory import` and a hook send the stand-in nothing. The
commands themselves, run as a user runs them, refuse without a key and print their dry run.
"""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path

import pytest

from echo_memory.libs.testing import EchoStack
from tests.history.history_fixtures import install
from tests.history.test_history_import import env_for
from tests.history.test_history_import import run as run_import
from tests.llm.llm_stack import counts
from tests.llm.openai_stand_in import Answer, StandIn, llm_env, serve

ROOT = Path(__file__).resolve().parents[2]
PROBE = textwrap.dedent("""
    import importlib, io, sys
    from echo_memory.libs.server.service.registry import SERVICES
    for info in SERVICES:
        importlib.import_module(info.module)
    from echo_memory.libs.server.store.schema import apply_migrations
    applied = apply_migrations(sys.argv[1])
    import echo_memory.libs.local.cli.history_commands
    import echo_memory.libs.local.cli.hook_commands
    import echo_memory.libs.local.history.engine
    from echo_memory.libs.local.cli.main import build_parser, main
    build_parser()
    sys.stdin = io.StringIO('{"prompt": "hello"}')
    main(["hook", "recall", "--client", "claude-code"])
    loaded = sorted(m for m in sys.modules if m == "echo_memory.libs.local.llm" or m.startswith("echo_memory.libs.local.llm."))
    print("applied", len(applied), "loaded", loaded)
""")


def never(request: object) -> Answer:
    return Answer(status=500, body={"error": {"message": "nothing may call the model here"}})


async def _python(env: dict[str, str], *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, *args, env=env, cwd=ROOT, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout=240)
    return proc.returncode or 0, out.decode(), err.decode()


def _env(stack: EchoStack | None, home: Path, stand_in: StandIn) -> dict[str, str]:
    base = env_for(stack, home) if stack is not None else {
        k: v for k, v in os.environ.items() if not k.startswith("ECHO_MEMORY_")} | {"HOME": str(home)}
    return {**base, **llm_env(stand_in)}


async def test_services_migrations_history_and_hooks_never_load_the_model_client(
    empty_database_url: str, tmp_path: Path
) -> None:
    with serve(never) as server:
        code, out, err = await _python(_env(None, tmp_path, server), "-c", PROBE, empty_database_url)
    assert code == 0, err
    assert "loaded []" in out and "applied 0" not in out, out
    assert server.requests == []


async def test_writes_an_import_and_a_hook_send_the_model_nothing(
    stack: EchoStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(tmp_path, ("codex",))
    with serve(never) as server:
        for key, value in llm_env(server).items():
            monkeypatch.setenv(key, value)
        env = _env(stack, tmp_path, server)
        async with stack.client(stack.issue_token("claude-code")) as client:
            written = await client.call_tool("write_episode", {
                "session_id": "s-1", "entities": [{"name": "api", "type": "service"}, {"name": "Postgres", "type": "db"}],
                "facts": [{"source": "api", "target": "Postgres", "relation": "stores data in",
                           "fact": "The api stores its data in Postgres because it needs transactions.",
                           "confidence": "extracted"}]})
        assert not written.is_error and written.structured_content["stored"]
        code, reports, err = await run_import(env)
        assert code == 0 and sum(r["imported"] for r in reports) > 0, err
        code, _, err = await _python(env, "-m", "echo_memory.libs.local.cli", "hook", "capture", "--client", "codex",
                                     stdin=b'{"prompt": "hi"}')
        assert code == 0, err
    assert server.requests == []


async def test_the_commands_refuse_without_a_key_and_print_a_dry_run_with_one(stack: EchoStack, tmp_path: Path) -> None:
    await stack.admin_call("writes", "import_episodes", {"episodes": [
        {"content": "assistant: The api retries twice because the network is flaky.", "source": "codex",
         "external_id": "t-1"}]})
    with serve(never) as server:
        env = _env(stack, tmp_path, server)
        bare = {k: v for k, v in env.items() if not k.startswith("ECHO_MEMORY_LLM_")}
        before = counts(stack)
        commands = ("distil", "infer-causal-hints")
        runs = await asyncio.gather(*(_python(bare, "-m", "echo_memory.libs.local.cli", c, "--write") for c in commands))
        for command, (code, _, err) in zip(commands, runs, strict=True):
            assert code == 1 and "ECHO_MEMORY_LLM_API_KEY" in err and "nothing was sent" in err, (command, err)
        assert counts(stack) == before and server.requests == []

    reply = ('{"entities": [{"name": "api", "type": "service"}, {"name": "network", "type": "thing"}], '
             '"facts": [{"source": "api", "target": "network", "relation": "retries because of", '
             '"fact": "The api retries twice because the network is flaky.", "confidence": "extracted", '
             '"quote": "The api retries twice because the network is flaky."}]}')
    with serve(lambda r: Answer(content=reply)) as server:
        code, out, err = await _python(_env(stack, tmp_path, server), "-m", "echo_memory.libs.local.cli", "distil")
    assert code == 0, err
    assert "+ (api) -retries because of-> (network): The api retries twice" in out
    assert "would write 1 (dry run: nothing written)" in out and "run again with --write" in out
    assert counts(stack) == before and len(server.requests) == 1
