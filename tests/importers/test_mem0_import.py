"""`echo-memory import --from mem0` on the history database and export mem0's own `Memory` wrote."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg

from echo_memory.libs.local.importers import mem0
from echo_memory.libs.testing import EchoStack
from tests.importers.support import FIXTURES, accounted, cli, env_for, facts_by

DIR = FIXTURES / "mem0"
TOOL = "echo-memory import --from mem0"


def history() -> list[tuple[Any, ...]]:
    with sqlite3.connect(DIR / "history.db") as conn:
        return conn.execute("SELECT memory_id, new_memory, event FROM history ORDER BY rowid").fetchall()


def history_times() -> list[tuple[Any, ...]]:
    with sqlite3.connect(DIR / "history.db") as conn:
        return conn.execute("SELECT memory_id, new_memory, event, updated_at FROM history ORDER BY rowid").fetchall()


def exported() -> list[dict[str, Any]]:
    return list(json.loads((DIR / "export.json").read_text())["results"])


async def test_versions_become_supersession_and_ids_provenance(stack: EchoStack, tmp_path: Path) -> None:
    env = env_for(stack, tmp_path)
    rows, memories = history(), exported()
    code, first, err = await cli(env, "import", "--from", "mem0", str(DIR))
    assert code == 0, err
    assert first is not None and first["records"] == len(rows) + len(memories)
    accounted(first)
    outcomes = first["outcomes"]
    updates = sum(e == "UPDATE" for _, _, e in rows)
    deletes = sum(e == "DELETE" for _, _, e in rows)
    assert outcomes["superseded"] == updates and outcomes["ended"] == deletes and outcomes["not_mapped"] == 0
    assert outcomes["refused"] == 1 and any("password" in r["reason"] for r in first["reasons"])
    # Each memory of the export is the history's last version: reported, not written twice.
    assert outcomes["unchanged"] == len(memories)

    facts = facts_by(stack, TOOL)
    assert len(facts) == outcomes["stored"] + outcomes["superseded"]
    assert "Tr0ub4dor" not in json.dumps(facts, default=str)
    by_relation: dict[str, list[dict[str, Any]]] = {}
    for fact in facts:
        by_relation.setdefault(fact["relation"], []).append(fact)
    for memory_id in {m for m, _, e in rows if e != "DELETE"}:
        versions = [new for m, new, e in rows if m == memory_id and e in ("ADD", "UPDATE") and "password" not in new]
        stored = by_relation.get(f"memory {memory_id}", [])
        assert [f["text"].split(": ", 1)[1] for f in stored] == versions, memory_id
        alive = not any(m == memory_id and e == "DELETE" for m, _, e in rows)
        assert [f["current"] for f in stored] == [False] * (len(versions) - 1) + [alive] * bool(versions)
        assert all(later["supersedes"] is not None for later in stored[1:])
    # A deletion ends the memory's last version without erasing it, audited with its reason.
    deleted = next(m for m, _, e in rows if e == "DELETE")
    assert [f["current"] for f in by_relation[f"memory {deleted}"]] == [False]
    with psycopg.connect(stack.database_url) as conn:
        ended = conn.execute("SELECT reason, tool FROM audit_log WHERE kind = 'fact_ended'").fetchall()
    assert ended == [(f"memory {deleted} was deleted in mem0 at " + next(
        str(u) for m, _, e, u in history_times() if m == deleted and e == "DELETE"), TOOL)]

    # Provenance: the user owns the memory, the agent wrote it, the run is the session.
    billing = next(m for m in memories if m.get("agent_id"))
    fact = by_relation[f"memory {billing['id']}"][-1]
    assert (fact["source"], fact["source_type"], fact["agent"]) == (billing["user_id"], "person", billing["agent_id"])
    trip = next(m for m in memories if m.get("run_id"))
    assert by_relation[f"memory {trip['id']}"][-1]["session"] == f"mem0 run {trip['run_id']}"

    code, second, err = await cli(env, "import", "--from", "mem0", str(DIR))
    assert code == 0, err
    assert second is not None
    accounted(second)
    assert second["outcomes"]["stored"] == second["outcomes"]["superseded"] == 0
    assert len(facts_by(stack, TOOL)) == len(facts)
    assert [f["current"] for f in facts_by(stack, TOOL)] == [f["current"] for f in facts]


async def test_an_export_alone_stores_each_memory_once(stack: EchoStack, tmp_path: Path) -> None:
    env = env_for(stack, tmp_path)
    memories = exported()
    code, first, err = await cli(env, "import", "--from", "mem0", str(DIR / "export.json"))
    assert code == 0, err
    assert first is not None and first["records"] == len(memories)
    accounted(first)
    assert first["outcomes"]["stored"] == len(memories) - 1 and first["outcomes"]["refused"] == 1
    assert sorted(f["text"].split(": ", 1)[1] for f in facts_by(stack, TOOL)) == sorted(
        m["memory"] for m in memories if "password" not in m["memory"])


def test_malformed_exports_and_databases_are_refused_with_their_reason(tmp_path: Path) -> None:
    bad_json = tmp_path / "broken.json"
    bad_json.write_text('{"results": [{"id": "a", "memory": "ok"}, ')
    records = list(mem0.read(mem0.check_path(bad_json)))
    assert [(r.outcome, "not JSON" in (r.reason or "")) for r in records] == [("refused", True)]

    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"id": "m1", "memory": "fine", "user_id": "u"}, {"id": "m2"}, "text", {"memory": "x"}]))
    records = list(mem0.read(mem0.check_path(shapes)))
    assert [r.outcome for r in records] == [None, "refused", "refused", "refused"]
    assert all("memory 2" in (r.reason or "") or r.outcome is None for r in records[:2])

    not_mem0 = tmp_path / "other.db"
    with sqlite3.connect(not_mem0) as conn:
        conn.execute("CREATE TABLE notes (x TEXT)")
    records = list(mem0.read(mem0.check_path(not_mem0)))
    assert len(records) == 1 and records[0].outcome == "refused" and "not a mem0 history" in (records[0].reason or "")

    odd = tmp_path / "odd.db"
    with sqlite3.connect(odd) as conn:
        conn.execute("CREATE TABLE history (id TEXT, memory_id TEXT, old_memory TEXT, new_memory TEXT, event TEXT, "
                     "created_at TEXT, updated_at TEXT, is_deleted INT, actor_id TEXT, role TEXT)")
        conn.execute("INSERT INTO history VALUES ('1', 'm', NULL, 'v1', 'ADD', 't', 't', 0, NULL, NULL)")
        conn.execute("INSERT INTO history VALUES ('2', 'm', 'v1', NULL, 'UPDATE', 't', 'u', 0, NULL, NULL)")
        conn.execute("INSERT INTO history VALUES ('3', NULL, NULL, 'v', 'ADD', 't', 'v', 0, NULL, NULL)")
        conn.execute("INSERT INTO history VALUES ('4', 'm', NULL, 'v', 'MERGE', 't', 'w', 0, NULL, NULL)")
    records = list(mem0.read(mem0.check_path(odd)))
    assert [r.outcome for r in records] == [None, "refused", "refused", "refused"]
