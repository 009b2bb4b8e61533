"""export → import → export: identical content, ids kept or mapped, bad files refused.

The CLI's round trip into a second org and its refusal of bad files run on the full stack (a real
bus, the command as a process); the audit service's own export and import verbs, driven by the
CLI's functions, run on every service's routes with each request committing: an export reads up to
its own start, which rows of one rolled-back transaction share.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from audit_helpers import Writer, fact

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.audit import ExportFileError
from echo_memory.libs.core.contracts.errors import EchoError
from echo_memory.libs.local.backup import Call
from echo_memory.libs.local.cli.audit_commands import admin_session, export_to, import_lines, read_export_file
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.agents import Answers, Routes, caller, make_scope, wire
from echo_memory.libs.testing.tiers import Handlers

ROOT = Path(__file__).parents[2]
MEMORY_TABLES = ("entities", "entity_aliases", "facts", "fact_tiers", "episodes", "audit_log", "reads", "read_results",
                 "recall_saves", "documents")


TEAM = ["shared", "solo", "team-a"]


async def write_history(admin: Answers | EchoStack, a: Writer, b: Writer) -> None:
    """A store with supersession, causal hints, aliases, confirmed resolution, reads, a save, a solo
    scope, a named scope and a document — everything through the real tools, as claude-code (`a`,
    granted team-a) and cursor (`b`)."""
    entities = [("Billing API", "service"), ("Postgres", "database")]
    first = await a.write([("Billing API", "service"), {"name": "Postgres", "type": "database", "aliases": ["PG"]}],
                          [fact("Billing API", "Postgres", "stores data in", "The billing API stores data in Postgres.")])
    assert first["stored"], first
    await b.write(entities, [fact("Billing API", "Postgres", "stores data in",
                                  "The billing API stores invoices in Postgres 16.")], session="s-2")
    await b.write([("Release 7", "release"), ("Billing API", "service")],
                  [fact("Release 7", "Billing API", "broke", "Release 7 led to billing API errors.", "led_to")])
    await a.write([("Ops notebook", "doc"), ("Hunch", "idea")],
                  [fact("Ops notebook", "Hunch", "records", "The ops notebook records a hunch.")], scope="solo")
    await a.write([("Team board", "doc"), ("Sprint goal", "goal")],
                  [fact("Team board", "Sprint goal", "shows", "The team board shows the sprint goal.")], scope="team-a")
    read = await a.query("what database does billing use?")
    await a.save(read["results"][0]["id"], read["read_id"], "answered the on-call question")
    await b.query("what broke billing?")
    await admin.admin_call("writes", "register_documents", {
        "project": "ops", "documents": [{"path": "README.md", "content": "# Ops\nAll about operations."}]})


async def build_history(answers: Answers) -> None:
    """`write_history` below the full stack, each agent with a stored token (so exported as an agent)."""
    await make_scope(answers, "team-a")
    a = Writer(await wire(answers, "claude-code", read=TEAM, write=TEAM))
    await write_history(answers, a, Writer(await wire(answers, "cursor")))


async def build_history_on_stack(stack: EchoStack) -> None:
    await stack.admin_call("writes", "scope_create", {"name": "team-a"})
    token = stack.issue_token("claude-code", read=TEAM, write=TEAM)
    async with stack.client(token) as c, stack.client(stack.issue_token("cursor")) as d:
        await write_history(stack, Writer(c), Writer(d))


def admin_calls(answers: Answers) -> Call:
    """The CLI's admin call (`admin_session`) answered by a test tier."""
    async def call(service: str, verb: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
        return await answers.admin_call(service, verb, args)
    return call


async def export_text(settings: Settings | Call, scope: str | None = None) -> str:
    """The CLI's export over the bus of `settings`, or through a tier's admin call."""
    out = io.StringIO()
    if isinstance(settings, Settings):
        async with admin_session(settings) as call:
            await export_to(call, out, scope=scope, progress=None, timeout=30)
    else:
        await export_to(settings, out, scope=scope, progress=None, timeout=30)
    return out.getvalue()


def body(text: str) -> list[str]:
    """Every line but the header (which names the org and the export time)."""
    return text.splitlines()[1:]


def apply_map(lines: list[str], id_map: dict[str, str]) -> list[str]:
    """The lines as they should read after an import that reported `id_map`."""
    out = []
    for line in lines:
        for old, new in id_map.items():
            if not old.startswith("audit:"):
                line = line.replace(old, new)
        record = json.loads(line)
        if record.get("type") == "audit" and f"audit:{record['id']}" in id_map:
            record["id"] = int(id_map[f"audit:{record['id']}"].removeprefix("audit:"))
            line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        out.append(line)
    return out


async def cli(*args: str, org: str, nats_url: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    env = {**os.environ, "ECHO_MEMORY_NATS_URL": nats_url, "ECHO_MEMORY_ORG": org, **(env or {})}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "echo_memory.libs.local.cli", *args, env=env, cwd=ROOT,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


def row_counts(database_url: str) -> dict[str, int]:
    with psycopg.connect(database_url) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in MEMORY_TABLES}  # type: ignore[index]


def token_totals(database_url: str) -> dict[str, int]:
    """Each scope's kept full-dump size, by scope name (ids may be remapped)."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT s.name, t.active_tokens FROM fact_token_totals t JOIN scopes s ON s.id = t.scope_id")
        return {r[0]: r[1] for r in rows}


async def test_round_trip_through_the_cli_restores_identical_content(
    stack: EchoStack, registered_second_org: tuple[str, str], tmp_path: Path
) -> None:
    await build_history_on_stack(stack)
    with psycopg.connect(stack.database_url) as conn:  # two facts out of the hot tier, as a run would move them
        conn.execute("INSERT INTO fact_tiers (fact_id, tier) SELECT id, CASE WHEN n = 1 THEN 'consolidated' "
                     "ELSE 'archived' END FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM facts) f "
                     "WHERE n <= 2")
    target_org, target_url = registered_second_org
    file = tmp_path / "org.jsonl"
    code, _, err = await cli("export", "--out", str(file), "--progress", org=stack.org, nats_url=stack.nats_url)
    assert code == 0, err
    assert "exported" in err  # progress on stderr
    lines = file.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "echo-memory-export" and header["version"] == 1 and header["scope"] is None
    assert header["counts"]["fact"] == 5 and header["counts"]["recall_save"] == 1 and header["counts"]["document"] == 1
    assert json.loads(lines[-1]) == {"type": "end", "counts": header["counts"]}
    tiers = sorted(json.loads(line)["tier"] for line in lines if json.loads(line).get("type") == "fact")
    assert tiers == ["archived", "consolidated", "hot", "hot", "hot"]

    code, out, err = await cli("restore", str(file), org=target_org, nats_url=stack.nats_url)
    assert code == 0, err
    result = json.loads(out)
    assert result["ids_kept"] is True
    # Every id was kept (both databases come from one template, so even `shared` has the same id).
    assert result["id_map"] == {}
    assert sorted(result["scopes"]) == ["shared", "solo:claude-code", "team-a"]

    again = await export_text(Settings(org=target_org, nats_url=stack.nats_url))
    assert body(again) == apply_map(body(file.read_text()), result["id_map"])
    assert row_counts(target_url) == row_counts(stack.database_url)
    # A restore into an empty org suspends the insert triggers and recomputes the totals at the end.
    assert token_totals(target_url) == token_totals(stack.database_url) and len(token_totals(target_url)) == 3

    # The restored org works: trace_cause over the imported hinted fact, as an agent of that org.
    # (Over the bus: the edge serves only its own org's tokens.)
    from echo_memory.libs.core.contracts.bus import Caller
    from echo_memory.libs.server.bus.broker import make_broker
    from echo_memory.libs.server.bus.client import BusClient

    broker = make_broker(stack.nats_url)
    await broker.start()
    try:
        traced = await BusClient(broker).call_by_name(
            caller=Caller(org=target_org, agent_id="cursor", read_scopes=["shared"]), service="causal",
            verb="trace_cause", args={"topic": "Billing API"}, timeout=10)
    finally:
        await broker.stop()
    assert [s["from"] for s in traced["chains"][0]["steps"]] == ["Release 7"]


async def test_one_scope_into_another_name_remaps_every_id_and_reports_the_mapping(routes: Routes) -> None:
    await build_history(routes)
    call = admin_calls(routes)
    original = await export_text(call, scope="team-a")
    lines = original.splitlines()
    assert json.loads(lines[0])["scope"] == "team-a"
    assert {json.loads(line).get("type") for line in lines[1:-1]} >= {"scope", "entity", "fact", "episode", "audit"}
    assert not any('"type":"document"' in line for line in lines)  # org-level rows come only with a whole-org export

    result = await import_lines(call, [json.loads(line) for line in lines], scope="team-b", progress=None, timeout=30)
    assert result.ids_kept is False and result.scopes == ["team-b"]
    copy = await export_text(call, scope="team-b")
    mapped = apply_map(body(original), result.id_map)
    mapped = [line.replace('"name":"team-a"', '"name":"team-b"') for line in mapped]
    assert sorted(body(copy)) == sorted(mapped)
    old_facts = {json.loads(line)["id"] for line in lines if '"type":"fact"' in line}
    assert old_facts <= set(result.id_map) and not old_facts & set(result.id_map.values())

    # The same file again into the now non-empty scope is refused, and nothing changes.
    before = row_counts(routes.database_url)
    with pytest.raises(EchoError) as caught:
        await import_lines(call, [json.loads(line) for line in lines], scope="team-b", progress=None, timeout=30)
    assert caught.value.code == "invalid_argument" and "already holds memory" in caught.value.message
    assert row_counts(routes.database_url) == before


def corrupt(lines: list[str], how: str) -> str:
    body = list(lines)
    if how == "foreign":
        return '{"hello": "world"}\n' + "\n".join(body[1:]) + "\n"
    if how == "future":
        header = json.loads(body[0])
        header["version"] = 99
        body[0] = json.dumps(header)
    if how == "truncated":
        body = body[:-3]
    if how == "not json":
        body[3] = body[3][:-5]
    if how == "dangling":
        record = next(i for i, line in enumerate(body) if '"type":"fact"' in line)
        data = json.loads(body[record])
        data["source_entity"] = "00000000-0000-0000-0000-0000000000aa"
        body[record] = json.dumps(data)
    if how == "bad field":
        record = next(i for i, line in enumerate(body) if '"type":"entity"' in line)
        data = json.loads(body[record])
        data["surprise"] = 1
        body[record] = json.dumps(data)
    return "\n".join(body) + "\n"


BAD_FILES = [
    ("foreign", "does not start an Echo Memory export"), ("future", "version 99"), ("truncated", "end line"),
    ("not json", "not JSON"), ("dangling", "names no earlier entity"), ("bad field", "surprise"),
]


async def test_malformed_or_foreign_files_are_refused_before_anything_is_written(
    stack: EchoStack, registered_second_org: tuple[str, str], tmp_path: Path
) -> None:
    async with stack.client(stack.issue_token("claude-code")) as c:
        await Writer(c).write([("Billing API", "service"), ("Postgres", "database")],
                              [fact("Billing API", "Postgres", "uses", "The billing API uses Postgres.")])
    target_org, target_url = registered_second_org
    lines = (await export_text(Settings(org=stack.org, nats_url=stack.nats_url))).splitlines()
    before = row_counts(target_url)
    for n, (how, message) in enumerate(BAD_FILES):
        file = tmp_path / f"bad-{n}.jsonl"
        file.write_text(corrupt(lines, how))
        if how in ("foreign", "not json"):  # the real command (a process start costs ~3 s, so twice only)
            code, _, err = await cli("restore", str(file), org=target_org, nats_url=stack.nats_url)
            assert code == 2 and "refused, nothing was written" in err and message in err, (how, err)
        else:  # the same check the command runs before sending anything
            with pytest.raises(ExportFileError, match=message):
                read_export_file(file)
        assert row_counts(target_url) == before, how
        if how == "not json":
            continue
        # The service checks again on its own: the same lines sent straight over the bus are refused too.
        import_id = f"6f1d2c3b-0000-4000-8000-00000000000{n}"
        async with admin_session(Settings(org=target_org, nats_url=stack.nats_url)) as call:
            staged = [json.loads(line) for line in corrupt(lines, how).splitlines()]
            await call("audit", "import_stage", {"import_id": import_id, "first_line": 0, "lines": staged}, 30)
            with pytest.raises(EchoError) as caught:
                await call("audit", "import", {"import_id": import_id}, 30)
        assert caught.value.code == "invalid_argument" and message in caught.value.message, how
        assert row_counts(target_url) == before, how


async def test_export_and_import_need_the_admin_identity(handlers: Handlers) -> None:
    agent = caller(handlers.org, "claude-code", read=["shared", "solo"], write=["shared"])
    for verb, args in (("export", {}), ("import", {"import_id": "6f1d2c3b-0000-4000-8000-000000000002"})):
        with pytest.raises(EchoError) as caught:
            await handlers.call(agent, "audit", verb, args)
        assert caught.value.code == "scope_denied", verb
    with pytest.raises(EchoError) as caught:
        await handlers.admin_call("audit", "export", {"scope": "no-such-scope"})
    assert caught.value.code == "not_found"
    with pytest.raises(EchoError) as caught:
        await handlers.admin_call("audit", "export", {"cursor": "bm9wZQ"})
    assert caught.value.code == "invalid_argument"


AGENT_FIELDS = ("owner_agent", "created_by", "agent_id")


async def test_a_one_scope_export_lists_only_the_agents_its_rows_name(routes: Routes) -> None:
    await build_history(routes)
    settings = admin_calls(routes)
    records = [json.loads(line) for line in (await export_text(settings, scope="team-a")).splitlines()[1:-1]]
    listed = {r["id"] for r in records if r["type"] == "agent"}
    named = {r[f] for r in records if r["type"] != "agent" for f in AGENT_FIELDS if r.get(f)}
    assert listed == named == {"claude-code"}
    whole = [json.loads(line) for line in (await export_text(settings)).splitlines()[1:-1]]
    assert {"claude-code", "cursor"} <= {r["id"] for r in whole if r["type"] == "agent"}
