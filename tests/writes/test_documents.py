"""Project memory files: `echo-memory docs sync` (the real CLI), pending_documents and mark_ingested (real MCP).

Paging and refusals of the writes service's own verbs run on the handler tier; the command, over
the real bus, on the full stack.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from echo_memory.libs.core.contracts.documents import MAX_DOCUMENT_BYTES, PENDING_BYTES_BUDGET
from echo_memory.libs.core.contracts.framing import MEMORY_NOTICE
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import Agent
from echo_memory.libs.testing.tiers import Handlers
from tests.writes.conftest import call, counts, sql

FILES = {
    "CLAUDE.md": "# Conventions\nUse uv, never pip. Tests run with pytest -q.\n",
    "AGENTS.md": "Agents: keep PRs under 400 lines.\n",
    ".cursor/rules/python.mdc": "Prefer dataclasses over dicts for records.\n",
    ".github/copilot-instructions.md": "The API lives in services/api.\n",
    "notes/decisions.md": "We chose Postgres over MySQL in 2024 for pgvector.\n",
    "services/api/CLAUDE.md": "The API service owns the /v1 routes.\n",
}
IGNORED = {
    "README.md": "Not a memory file.\n",
    "node_modules/pkg/CLAUDE.md": "Vendored, never registered.\n",
    "notes/diagram.png": "binary-ish\n",
}


def _project(root: Path, files: dict[str, str]) -> None:
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")


async def _sync_process(stack: EchoStack, *args: str) -> tuple[int, str]:
    """`echo-memory docs sync` as a user runs it: a separate process."""
    env = {**os.environ, "ECHO_MEMORY_NATS_URL": stack.nats_url, "ECHO_MEMORY_ORG": stack.org}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "echo_memory.libs.local.cli", "docs", "sync", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    return process.returncode or 0, out.decode()


@pytest.fixture
def sync(stack: EchoStack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """The same CLI entry point in a worker thread (a process start costs seconds; this costs none)."""
    from echo_memory.libs.local.cli.main import main

    monkeypatch.setenv("ECHO_MEMORY_NATS_URL", stack.nats_url)
    monkeypatch.setenv("ECHO_MEMORY_ORG", stack.org)

    async def run(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = await asyncio.to_thread(main, ["docs", "sync", *args])
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    return run


async def _pending(client, project: str = "shop", **extra: object) -> dict:  # type: ignore[no-untyped-def]
    is_error, result = await call(client, "pending_documents", {"project": project, **extra})
    assert not is_error, result
    return result


async def test_sync_registers_memory_files_and_pending_is_per_agent_until_content_changes(
    stack: EchoStack, tmp_path: Path, sync
) -> None:
    _project(tmp_path, {**FILES, **IGNORED})
    code, out = await _sync_process(stack, str(tmp_path), "--project", "shop")
    assert code == 0, out
    assert f"project 'shop': {len(FILES)} new, 0 changed, 0 unchanged, 0 refused" in out
    registered = await sql(stack.database_url, "SELECT path FROM documents ORDER BY path")
    assert [r[0] for r in registered] == sorted(FILES)

    code, out = await sync(str(tmp_path), "--project", "shop")  # the same content again: a no-op
    assert code == 0 and f"0 new, 0 changed, {len(FILES)} unchanged" in out, out
    assert await sql(stack.database_url, "SELECT count(*) FROM audit_log WHERE kind = 'document_registered'") == [(len(FILES),)]

    async with stack.client(stack.issue_token("claude-code")) as claude, stack.client(stack.issue_token("cursor")) as cursor:
        pending = await _pending(claude)
        assert [d["path"] for d in pending["documents"]] == sorted(FILES) and pending["more"] is False
        first = pending["documents"][0]
        assert first["content"] == FILES[first["path"]]
        assert first["size"] == len(FILES[first["path"]].encode()) and first["approx_tokens"] > 0
        assert first["content_hash"].startswith("sha256:") and first["project"] == "shop"

        claude_md = next(d for d in pending["documents"] if d["path"] == "CLAUDE.md")
        is_error, marked = await call(claude, "mark_ingested",
                                      {"document_id": claude_md["document_id"], "content_hash": claude_md["content_hash"]})
        assert not is_error and marked["already"] is False
        _, again = await call(claude, "mark_ingested", {"document_id": claude_md["document_id"]})
        assert again["already"] is True
        assert "CLAUDE.md" not in [d["path"] for d in (await _pending(claude))["documents"]]
        assert "CLAUDE.md" in [d["path"] for d in (await _pending(cursor))["documents"]]  # pending per agent

        # Changed content is pending again; changing it back to what was ingested is pending again too.
        (tmp_path / "CLAUDE.md").write_text("# Conventions\nUse uv. Tests run with pytest -x.\n", encoding="utf-8")
        code, out = await sync(str(tmp_path), "--project", "shop")
        assert "changed   CLAUDE.md" in out and "1 changed" in out, out
        changed = next(d for d in (await _pending(claude))["documents"] if d["path"] == "CLAUDE.md")
        assert changed["document_id"] != claude_md["document_id"]
        await call(claude, "mark_ingested", {"document_id": changed["document_id"]})
        (tmp_path / "CLAUDE.md").write_text(FILES["CLAUDE.md"], encoding="utf-8")
        await sync(str(tmp_path), "--project", "shop")
        reverted = next(d for d in (await _pending(claude))["documents"] if d["path"] == "CLAUDE.md")
        assert reverted["document_id"] == claude_md["document_id"] and reverted["content"] == FILES["CLAUDE.md"]

    audits = await sql(stack.database_url, "SELECT kind, agent_id, after->>'path' FROM audit_log "
                                           "WHERE kind = 'document_ingested' ORDER BY id")
    assert audits == [("document_ingested", "claude-code", "CLAUDE.md")] * 2
    current = await sql(stack.database_url, "SELECT count(*) FROM documents WHERE path = 'CLAUDE.md' AND superseded_at IS NULL")
    assert current == [(1,)]


async def test_files_with_secrets_are_refused_and_the_rest_registered(stack: EchoStack, tmp_path: Path, sync) -> None:
    _project(tmp_path, {"CLAUDE.md": "Deploy with DEPLOY_TOKEN=" + "abc123def456ghi789\n", "AGENTS.md": "Be brief.\n"})
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "big.md").write_text("x" * (MAX_DOCUMENT_BYTES + 1), encoding="utf-8")
    code, out = await sync(str(tmp_path), "--project", "ops")
    assert code == 1, out
    assert "refused   CLAUDE.md: contains a password or secret in an assignment" in out
    assert "abc123def456ghi789" not in out
    assert "skipped   notes/big.md" in out and "new       AGENTS.md" in out
    assert await sql(stack.database_url, "SELECT path FROM documents") == [("AGENTS.md",)]


async def test_pending_is_paged_by_count_and_by_bytes(handlers: Handlers) -> None:
    big = "y" * (PENDING_BYTES_BUDGET * 3 // 8)  # two fit in one answer, three do not
    docs = [{"path": f"notes/{i:02}.md", "content": f"note {i}"} for i in range(5)]
    docs += [{"path": f"notes/big-{c}.md", "content": big} for c in "abc"]
    registered = await handlers.admin_call("writes", "register_documents", {"project": "paged", "documents": docs})
    assert [d["status"] for d in registered["documents"]] == ["new"] * 8
    client = Agent(handlers, "codex")
    by_count = await _pending(client, "paged", limit=3)
    by_bytes = await _pending(client, "paged", limit=50)
    nothing = await _pending(client, "no-such-project")
    assert [d["path"] for d in by_count["documents"]] == ["notes/00.md", "notes/01.md", "notes/02.md"]
    assert by_count["more"] is True
    assert [d["path"] for d in by_bytes["documents"]][-1] == "notes/big-b.md" and by_bytes["more"] is True
    assert {k: nothing[k] for k in ("documents", "more", "memory_notice", "project", "matched")} == {
        "documents": [], "more": False, "memory_notice": MEMORY_NOTICE, "project": None, "matched": "none"}


async def test_mark_ingested_refusals_are_typed_and_change_nothing(handlers: Handlers) -> None:
    registered = await handlers.admin_call("writes", "register_documents",
                                        {"project": "p", "documents": [{"path": "AGENTS.md", "content": "Be brief."}]})
    document_id = registered["documents"][0]["document_id"]
    before = await counts(handlers.conn)
    cases = [
        ({"document_id": "00000000-0000-0000-0000-000000000000"}, "not_found"),
        ({"document_id": "doc-1"}, "invalid_argument"),
        ({"document_id": document_id, "content_hash": "sha256:0000"}, "invalid_argument"),
        ({"document_id": document_id, "extra": 1}, "invalid_argument"),
    ]
    client = Agent(handlers, "codex")
    results = [await call(client, "mark_ingested", args) for args, _ in cases]
    _, pending = await call(client, "pending_documents", {"project": "p", "limit": 0})
    assert [(e, r["error"]["code"], r["error"]["retryable"]) for e, r in results] == [
        (True, code, False) for _, code in cases]
    assert pending["error"]["code"] == "invalid_argument"
    assert await counts(handlers.conn) == before


async def test_register_documents_refuses_a_path_twice_in_one_call(handlers: Handlers) -> None:
    from echo_memory.libs.core.contracts.errors import InvalidArgument

    try:
        await handlers.admin_call("writes", "register_documents", {"project": "p", "documents": [
            {"path": "A.md", "content": "1"}, {"path": "A.md", "content": "2"}]})
    except InvalidArgument as exc:
        assert "each path may appear once" in exc.message
    else:
        raise AssertionError("a duplicated path was accepted")
    assert (await counts(handlers.conn))["documents"] == 0


async def test_sync_leaves_out_what_install_wrote(stack: EchoStack, tmp_path: Path, sync) -> None:
    """The installer's own block and files are not project memory: only the user's text is registered."""
    from echo_memory.libs.local.clients import CLIENTS, Connection, apply_changes, plan_install

    user_claude = "# Conventions\nDeploys go through the blue-green pipeline.\n"
    _project(tmp_path, {"CLAUDE.md": user_claude, "notes/decisions.md": "We chose Postgres for pgvector.\n"})
    conn = Connection(kind="http", url="http://127.0.0.1:8765/mcp")
    for name in ("claude-code", "codex", "cursor", "vscode", "gemini"):
        apply_changes(plan_install(CLIENTS[name], tmp_path / "home", tmp_path, conn, None))
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file() and "home" not in p.parts}
    assert {"AGENTS.md", "GEMINI.md", ".cursor/rules/echo-memory.mdc"} <= written  # the installer wrote them here

    code, out = await sync(str(tmp_path), "--project", "shop")
    assert code == 0, out
    rows = await sql(stack.database_url, "SELECT path, content FROM documents ORDER BY path")
    assert rows == [("CLAUDE.md", user_claude), ("notes/decisions.md", "We chose Postgres for pgvector.\n")]
    assert "skipped   AGENTS.md: written by `echo-memory install`" in out
    assert "echo-memory:begin" not in "".join(r[1] for r in rows)


async def test_pending_document_text_is_found_by_query_memory_until_ingested(stack: EchoStack, tmp_path: Path, sync) -> None:
    _project(tmp_path / "shop", {"notes/billing.md": "Refunds above 500 euros need approval from the finance lead.\n"})
    code, out = await sync(str(tmp_path / "shop"))
    assert code == 0, out
    async with stack.client(stack.issue_token("claude-code")) as claude:
        is_error, found = await call(claude, "query_memory", {"query": "who approves large refunds?"})
        assert not is_error, found
        assert found["results"] == []  # no fact holds it yet
        [hit] = found["pending_documents"]
        assert (hit["kind"], hit["ingested"], hit["project"], hit["path"]) == ("pending_document", False, "shop",
                                                                              "notes/billing.md")
        assert "finance lead" in hit["excerpt"]
        text = (await claude.call_tool("query_memory", {"query": "who approves large refunds?"})).content[0].text
        assert "pending document, not yet ingested" in text and "finance lead" in text

        _, unrelated = await call(claude, "query_memory", {"query": "kubernetes cluster upgrade"})
        assert unrelated["pending_documents"] == []

        # The project by its directory's path or by its name; the answer says which matched.
        by_path = await _pending(claude, str(tmp_path / "shop"))
        assert (by_path["project"], by_path["matched"]) == ("shop", "path")
        by_name = await _pending(claude, "shop")
        assert (by_name["project"], by_name["matched"]) == ("shop", "name")
        none = await _pending(claude, str(tmp_path / "elsewhere"))
        assert (none["documents"], none["project"], none["matched"]) == ([], None, "none")
        assert "elsewhere" in none["note"]

        await call(claude, "mark_ingested", {"document_id": by_name["documents"][0]["document_id"]})
        _, after = await call(claude, "query_memory", {"query": "who approves large refunds?"})
        assert after["pending_documents"] == []
    async with stack.client(stack.issue_token("cursor")) as cursor:  # still pending for another agent
        _, other = await call(cursor, "query_memory", {"query": "who approves large refunds?"})
        assert [d["path"] for d in other["pending_documents"]] == ["notes/billing.md"]
