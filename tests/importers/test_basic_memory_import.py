"""`echo-memory import --from basic-memory` on a knowledge base basic-memory itself wrote, and on hostile folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from echo_memory.libs.local.importers import basic_memory
from echo_memory.libs.local.importers.records import SourceRecord
from echo_memory.libs.testing import EchoStack
from tests.importers.support import FIXTURES, accounted, cli, env_for, facts_by

KB = FIXTURES / "basic-memory" / "kb"
PARSED = json.loads((FIXTURES / "basic-memory" / "basic-memory-parsed.json").read_text())
TOOL = "echo-memory import --from basic-memory"


def _records(root: Path) -> list[SourceRecord]:
    return list(basic_memory.read(basic_memory.check_path(root)))


def test_the_reader_sees_what_basic_memory_parsed() -> None:
    records = _records(KB)
    assert {r.where for r in records if r.kind == "note"} == set(PARSED)
    for rel, note in PARSED.items():
        mine = [r for r in records if r.where.split(":")[0] == rel]
        entity = next(r for r in mine if r.kind == "note")
        assert entity.fact is not None and entity.fact.source == note["title"]
        assert f"permalink {note['permalink']}" in entity.fact.text
        observed = []
        for r in mine:
            if r.kind == "observation":
                assert r.fact is not None
                category = r.fact.relation.rsplit(" #", 1)[0]
                observed.append([category, r.fact.text.removeprefix(f"{note['title']} ({category}): ")])
        assert len(observed) == len(note["observations"]), rel
        for (category, text), (bm_category, bm_text) in zip(observed, note["observations"], strict=True):
            # basic-memory keeps a trailing "(context)" apart; the fact keeps it in its text.
            assert category == bm_category and (text == bm_text or text.startswith(bm_text + " (")), (text, bm_text)
        related = sorted([r.fact.relation, r.fact.target] for r in mine if r.kind == "relation" and r.fact)
        assert related == note["relations"], rel
    tags = next(r for r in records if r.where == "coffee/Coffee Brewing Methods.md")
    assert tags.fact is not None and "tags coffee, brewing" in tags.fact.text


async def test_every_note_observation_and_relation_is_stored_or_reported(stack: EchoStack, tmp_path: Path) -> None:
    env = env_for(stack, tmp_path)
    expected = len(PARSED) + sum(len(n["observations"]) + len(n["relations"]) for n in PARSED.values())

    code, first, err = await cli(env, "import", "--from", "basic-memory", str(KB), "--scope", "shared")
    assert code == 0, err
    assert first is not None and first["records"] == expected
    accounted(first)
    refused = [r for r in first["reasons"] if r["outcome"] == "refused"]
    assert len(refused) == 1 and "AWS access key" in refused[0]["reason"], first["reasons"]
    facts = facts_by(stack, TOOL)
    assert len(facts) == first["outcomes"]["stored"] + first["outcomes"]["superseded"]
    assert first["outcomes"]["stored"] + first["outcomes"]["deferred"] + first["outcomes"]["superseded"] == expected - 1
    assert "AKIA" not in json.dumps(facts)
    types = {f["source"]: f["source_type"] for f in facts}
    assert types.get("Sam Rivera") == "person" and types.get("Grinder Settings") == "reference"
    assert any(f["relation"] == "grown_in" and f["target"] == "Ethiopia" for f in facts)

    code, second, err = await cli(env, "import", "--from", "basic-memory", str(KB), "--scope", "shared")
    assert code == 0, err
    assert second is not None
    accounted(second)
    assert second["outcomes"]["stored"] == second["outcomes"]["superseded"] == 0
    assert len(facts_by(stack, TOOL)) == len(facts)


def test_links_out_of_the_folder_and_unreadable_files_are_refused_one_by_one(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    shutil.copytree(KB, root)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("- [leak] read from outside the folder\n")
    (root / "leak.md").symlink_to(outside / "secret.md")
    (root / "linked-dir").symlink_to(outside, target_is_directory=True)
    (root / "broken.md").write_bytes(b"- [bad] \xff\xfe not utf-8\n")
    records = _records(root)
    texts = json.dumps([r.model_dump() for r in records])
    assert "read from outside the folder" not in texts
    by_where = {r.where: r for r in records if r.outcome == "refused"}
    assert "symbolic link out of the folder" in (by_where["leak.md"].reason or "")
    assert "symbolic link out of the folder" in (by_where["linked-dir"].reason or "")
    assert "not UTF-8" in (by_where["broken.md"].reason or "")
    # The good notes are read as before, whatever sits beside them.
    assert len([r for r in records if r.kind == "note" and r.outcome is None]) == len(PARSED)


async def test_a_path_that_climbs_or_is_not_a_folder_is_refused_before_anything_is_sent(
        stack: EchoStack, tmp_path: Path) -> None:
    env = env_for(stack, tmp_path)
    code, _, err = await cli(env, "import", "--from", "basic-memory", f"{KB}/../kb")
    assert code == 2 and "'..'" in err, err
    code, _, err = await cli(env, "import", "--from", "basic-memory", str(KB / "people" / "Sam Rivera.md"))
    assert code == 2 and "not a folder" in err, err
    assert facts_by(stack, TOOL) == []
