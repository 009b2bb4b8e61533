"""Export and import of stores larger than one bus message: byte-bounded pages, resume, big records."""

from __future__ import annotations

import io
import json
import re
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from test_export_import import body, cli, export_text

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.audit import (
    EXPORT_PAGE_BYTES,
    MAX_EXPORT_PAGE_BYTES,
    ExportFileError,
    wire_size,
)
from echo_memory.libs.core.contracts.errors import BusTimeout, EchoError
from echo_memory.libs.local.backup import Call, PartialExport, export_to, read_partial_export
from echo_memory.libs.local.cli.audit_commands import admin_session
from echo_memory.libs.testing import EchoStack
from echo_memory.libs.testing.backup_store import StoreSize, build_store, table_checksums

# Big enough that a 1,000-record page of the old export passed NATS's 1 MiB max_payload.
LARGE = StoreSize(facts=1200, superseded=300, reads=120)
SMALL_PAGE = 64 * 1024
NATS_MAX_PAYLOAD = 1024 * 1024


def recording(call: Call, sizes: list[int]) -> Call:
    """`call`, noting the encoded size of every reply."""

    async def wrapped(service: str, verb: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
        result = await call(service, verb, args, timeout)
        sizes.append(wire_size(result))
        return result

    return wrapped


async def test_a_store_larger_than_a_bus_message_round_trips_into_an_empty_org(
    stack: EchoStack, registered_second_org: tuple[str, str], tmp_path: Path
) -> None:
    written = await build_store(stack.database_url, LARGE)
    before = table_checksums(stack.database_url)
    file = tmp_path / "org.jsonl"
    code, _, err = await cli("export", "--out", str(file), "--progress", org=stack.org, nats_url=stack.nats_url)
    assert code == 0, err
    total = re.findall(r"exported (\d+)/(\d+) records", err)[-1]
    assert total[0] == total[1] and int(total[0]) > 4000, err  # progress reached the header's total
    header = json.loads(file.read_text().splitlines()[0])
    assert header["counts"]["fact"] == written["facts"] == 1500
    assert header["counts"]["audit"] == written["audit_log"]

    # Every page stays under the budget; the same export through the functions is byte-identical.
    sizes: list[int] = []
    out = io.StringIO()
    async with admin_session(Settings(org=stack.org, nats_url=stack.nats_url)) as call:
        await export_to(recording(call, sizes), out, scope=None, progress=None, timeout=60)
    assert len(sizes) >= 10 and max(sizes) <= EXPORT_PAGE_BYTES + 8 * 1024 < NATS_MAX_PAYLOAD, sizes
    assert body(out.getvalue()) == body(file.read_text())

    target_org, target_url = registered_second_org
    code, out_text, err = await cli("restore", str(file), "--progress", org=target_org, nats_url=stack.nats_url)
    assert code == 0, err
    assert re.search(r"staged (\d+)/\1 lines", err), err
    assert json.loads(out_text)["ids_kept"] is True
    assert table_checksums(target_url) == before
    # The restore built indexes and BM25 statistics once at the end: the same as the source's, and
    # the statistics triggers are back on for the next write.
    assert derived_state(target_url) == derived_state(stack.database_url)
    with psycopg.connect(target_url) as conn:
        facts = conn.execute("SELECT doc_count FROM lexical_stats WHERE corpus = 'facts' ORDER BY scope_id").fetchall()
        assert sum(r[0] for r in facts) == 1500
        conn.execute("INSERT INTO facts (scope_id, source_entity, target_entity, relation, text, confidence, agent_id, "
                     "embedding, token_count) SELECT scope_id, source_entity, target_entity, 'restored-check', "
                     "'zebra quokka', confidence, agent_id, embedding, 2 FROM facts LIMIT 1")
        assert conn.execute("SELECT df FROM lexical_df WHERE term = 'quokka'").fetchone() == (1,)


DERIVED = {
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY indexname",
    "triggers": "SELECT tgname, tgenabled FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname",
    # A rebuild (like reindex's) also records an empty corpus, which the insert trigger never sees.
    "stats": "SELECT scope_id, corpus, doc_count, total_length, format_version FROM lexical_stats "
             "WHERE doc_count > 0 ORDER BY 1, 2",
    "df": "SELECT md5(string_agg(scope_id || corpus || term || df, '|' ORDER BY scope_id, corpus, term)) FROM lexical_df",
}


def derived_state(database_url: str) -> dict[str, list[tuple[Any, ...]]]:
    """What a database derives from its rows: indexes, triggers and their state, BM25 statistics."""
    with psycopg.connect(database_url) as conn:
        return {name: conn.execute(query).fetchall() for name, query in DERIVED.items()}


async def test_an_interrupted_export_resumes_after_its_last_complete_line(stack: EchoStack, tmp_path: Path) -> None:
    await build_store(stack.database_url, StoreSize(facts=300, superseded=60, reads=30))
    settings = Settings(org=stack.org, nats_url=stack.nats_url)
    reference = await export_text(settings)
    partial = tmp_path / "org.jsonl.partial"
    pages = 0
    async with admin_session(settings) as call:

        async def cut_at_the_fourth_page(service: str, verb: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
            nonlocal pages
            pages += 1
            if pages == 4:
                raise BusTimeout("the audit service did not answer export")
            return await call(service, verb, args, timeout)

        with partial.open("w", encoding="utf-8") as handle, pytest.raises(BusTimeout):
            await export_to(cut_at_the_fourth_page, handle, scope=None, progress=None, timeout=30, page_bytes=SMALL_PAGE)
    data = partial.read_bytes()
    partial.write_bytes(data[:-700])  # the interruption also cut the last line in half
    state = read_partial_export(partial)
    assert 0 < sum(state.counts.values()) < json.loads(reference.splitlines()[0])["counts"]["fact"]
    assert state.complete_bytes < len(data) - 700

    # A row written after the cutoff stays out of the resumed file, as of an uninterrupted one.
    with psycopg.connect(stack.database_url) as conn:
        conn.execute("INSERT INTO audit_log (kind, agent_id, reason) VALUES ('document_registered', 'late', 'late')")
    env = {"ECHO_MEMORY_BACKUP_PAGE_BYTES": str(SMALL_PAGE)}
    code, _, err = await cli("export", "--resume", str(tmp_path / "org.jsonl"), org=stack.org,
                             nats_url=stack.nats_url, env=env)
    assert code == 0, err
    final = tmp_path / "org.jsonl"
    assert final.exists() and not partial.exists()
    lines = final.read_text().splitlines()
    assert lines[0] == data.decode().splitlines()[0]  # the interrupted export's own header
    assert lines[1:] == body(reference)

    # A complete file, a file of another org or a foreign file is not resumed.
    with pytest.raises(ExportFileError, match="complete export already"):
        read_partial_export(final)
    code, _, err = await cli("export", "--resume", str(final), org="another-org", nats_url=stack.nats_url)
    assert code == 2 and "complete export already" in err, err
    foreign = tmp_path / "notes.jsonl"
    foreign.write_text('{"hello": "world"}\n')
    with pytest.raises(ExportFileError, match="does not start with an Echo Memory export header"):
        read_partial_export(foreign)
    other = tmp_path / "other.jsonl.partial"
    other.write_text(lines[0].replace(f'"org":"{stack.org}"', '"org":"another-org"') + "\n")
    code, _, err = await cli("export", "--resume", str(other), org=stack.org, nats_url=stack.nats_url)
    assert code == 2 and "is an export of org 'another-org'" in err, err


INSERT_DOCUMENT = """
INSERT INTO documents (id, project, path, content_hash, content, size)
VALUES (%(id)s, 'ops', %(path)s, %(hash)s, %(content)s, %(size)s)
"""


def add_document(database_url: str, size: int) -> str:
    ident = str(uuid.uuid4())
    content = ("operations notes " * (size // 17 + 1))[:size]
    with psycopg.connect(database_url) as conn:
        conn.execute(INSERT_DOCUMENT, {"id": ident, "path": f"{ident}.md", "hash": ident, "content": content,
                                       "size": size})
    return ident


async def test_a_record_over_the_budget_travels_alone_and_one_no_message_carries_is_named(stack: EchoStack) -> None:
    await build_store(stack.database_url, StoreSize(facts=60, superseded=10, reads=10))
    big = add_document(stack.database_url, 3 * SMALL_PAGE)
    settings = Settings(org=stack.org, nats_url=stack.nats_url)
    pages: list[list[str]] = []
    async with admin_session(settings) as call:

        async def noting(service: str, verb: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
            page = await call(service, verb, args, timeout)
            pages.append([r.get("id", "") for r in page["records"]])
            return page

        out = io.StringIO()
        await export_to(noting, out, scope=None, progress=None, timeout=30, page_bytes=SMALL_PAGE)
    assert [big] in pages  # alone on its page
    assert f'"id":"{big}"' in out.getvalue()

    huge = add_document(stack.database_url, MAX_EXPORT_PAGE_BYTES + 1)
    async with admin_session(settings) as call:
        with pytest.raises(EchoError) as caught:
            await export_to(call, io.StringIO(), scope=None, progress=None, timeout=30)
    assert caught.value.code == "internal" and f"document {huge}" in caught.value.message


def test_resume_state_counts_only_complete_lines(tmp_path: Path) -> None:
    file = tmp_path / "cut.jsonl"
    header = {"format": "echo-memory-export", "version": 1, "org": "local", "scope": None, "cutoff": "2025-01-01T00:00:00+00:00",
              "counts": {}}
    file.write_text(json.dumps(header) + "\n" + '{"type":"scope","id":"a"}\n' + '{"type":"agent","id":"b"')
    state = read_partial_export(file)
    assert state == PartialExport(header=header, counts={**dict.fromkeys(state.counts, 0), "scope": 1},
                                  last={"type": "scope", "id": "a"},
                                  complete_bytes=len(file.read_bytes()) - len('{"type":"agent","id":"b"'))
