"""import: restore an export into an empty org or an empty scope, in one transaction.

The file arrives in chunks (`import_stage`, bookkeeping rows in import_staging) and is restored
by `import`, which re-checks the whole file with `parse_export` — a foreign, malformed, truncated
or edited file is refused before any memory row is written. Ids are kept when none of them exists
in the org yet (restoring into an empty org); otherwise every id gets a new value and the result
maps old → new. The import writes no audit row of its own: the file's audit log is the history,
and a restored store must export to the same content. Into an empty org, indexes and statistics
are built once at the end instead of row by row (services/audit/restore_upkeep.py).
"""

from __future__ import annotations

import base64
import re
import uuid
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from echo_memory.libs.core.contracts.audit import (
    ExportFileError,
    ImportInput,
    ImportResult,
    ImportStageInput,
    ImportStageResult,
    ParsedExport,
    ScopeRecord,
    parse_export,
)
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.errors import InvalidArgument, SchemaTooNew
from echo_memory.libs.server.store import embedding_models
from echo_memory.libs.server.store.access import SHARED
from echo_memory.libs.server.store.migrations import CODE_SCHEMA_VERSION
from echo_memory.services.audit import export_queries as xq
from echo_memory.services.audit import restore_upkeep
from echo_memory.services.audit.access import require_admin

_SCOPE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
# Fields holding ids of each record type (besides its own `id`), remapped together with the ids.
_ID_FIELDS = ("scope_id", "episode_id", "source_entity", "target_entity", "supersedes", "entity_id",
              "read_id", "item_id", "fact_id", "document_id")
_BATCH = 500  # rows per executemany: one pipeline round trip instead of one per row
_INSERT = {
    "agent": xq.INSERT_AGENT, "entity": xq.INSERT_ENTITY, "alias": xq.INSERT_ALIAS, "episode": xq.INSERT_EPISODE,
    "fact": xq.INSERT_FACT, "read": xq.INSERT_READ, "read_result": xq.INSERT_READ_RESULT,
    "recall_save": xq.INSERT_SAVE, "document": xq.INSERT_DOCUMENT, "document_ingestion": xq.INSERT_INGESTION,
}


async def import_stage(conn: psycopg.AsyncConnection, caller: Caller, args: ImportStageInput) -> ImportStageResult:
    """Keep one chunk of lines until `import` restores the file; re-sending a chunk replaces it."""
    require_admin(caller, "import")
    import_id = _import_id(args.import_id)
    await conn.execute(xq.STAGE_CLEANUP)
    async with conn.cursor() as cur:
        await cur.executemany(
            xq.STAGE_LINE, [(import_id, args.first_line + i, Jsonb(line)) for i, line in enumerate(args.lines)]
        )
    return ImportStageResult(import_id=import_id, staged=len(args.lines))


async def import_restore(conn: psycopg.AsyncConnection, caller: Caller, args: ImportInput) -> ImportResult:
    """Restore the staged file.

    Raises InvalidArgument for a bad file (naming the line), a target scope that already holds
    memory, documents into an org that has some, or a rename of a file with several scopes;
    SchemaTooNew for a file from a newer schema; ScopeDenied unless the caller is the org admin.
    """
    require_admin(caller, "import")
    import_id = _import_id(args.import_id)
    rows = await (await conn.execute(xq.STAGED_LINES, (import_id,))).fetchall()
    if not rows:
        raise InvalidArgument(f"nothing was staged for import {import_id}; send the file with import_stage first")
    if [r[0] for r in rows] != list(range(len(rows))):
        raise InvalidArgument("the staged file has missing lines; send every chunk again")
    try:
        parsed = parse_export([r[1] for r in rows])
    except ExportFileError as exc:
        raise InvalidArgument(f"refused, nothing was written: {exc}") from None
    if parsed.header.schema_version > CODE_SCHEMA_VERSION:
        raise SchemaTooNew(f"the file comes from schema version {parsed.header.schema_version}, newer than this "
                           f"code ({CODE_SCHEMA_VERSION}): upgrade echo-mem before importing it")
    plan = await _plan(conn, parsed, args.scope)
    suspended = await restore_upkeep.suspend(conn)
    await _insert_all(conn, parsed.records, plan)
    if suspended is not None:
        await restore_upkeep.resume(conn, suspended, [plan.ids[s.id] for s in _scopes(parsed)])
    if plan.keep_audit_ids:
        await conn.execute(xq.AUDIT_SEQUENCE_CATCH_UP)
    await conn.execute(xq.STAGE_DROP, (import_id,))
    id_map = {old: new for old, new in plan.ids.items() if old != new}
    return ImportResult(counts=parsed.counts, scopes=[plan.names[s.id] for s in _scopes(parsed)],
                        ids_kept=plan.keep_ids, id_map=id_map)


class _Plan:
    def __init__(self) -> None:
        self.ids: dict[str, str] = {}  # old id -> new id (identity when kept)
        self.names: dict[str, str] = {}  # file scope id -> target stored name
        self.renames: dict[str, str] = {}  # file scope name -> target stored name
        self.existing_scopes: set[str] = set()  # file scope ids restored into an existing row
        self.keep_ids = True
        self.keep_audit_ids = True

    def map(self, value: Any) -> Any:
        """Replace every id (also inside JSON before/after) by its new value."""
        if isinstance(value, str):
            return self.ids.get(value, value)
        if isinstance(value, dict):
            return {k: self.map(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.map(v) for v in value]
        return value


def _scopes(parsed: ParsedExport) -> list[ScopeRecord]:
    return [r for r in parsed.records if isinstance(r, ScopeRecord)]


async def _plan(conn: psycopg.AsyncConnection, parsed: ParsedExport, rename: str | None) -> _Plan:
    plan = _Plan()
    scopes = _scopes(parsed)
    if rename is not None:
        if len(scopes) != 1:
            raise InvalidArgument(f"--scope renames the file's only scope, but this file holds {len(scopes)} scopes")
        if not _SCOPE_NAME.match(rename):
            raise InvalidArgument(f"scope name '{rename}' must be lower-case letters, digits, '-' or '_'")
    for record in scopes:
        target = rename or record.name
        plan.names[record.id] = target
        plan.renames[record.name] = target
        row = await (await conn.execute(xq.SCOPE_BY_NAME, (target,))).fetchone()
        if row is None:
            continue
        holds = await (await conn.execute(xq.SCOPE_HOLDS_MEMORY, {"scope_id": row[0]})).fetchone()
        if holds and holds[0]:
            raise InvalidArgument(f"refused, nothing was written: scope '{target}' already holds memory; "
                                  "`echo-memory restore` writes only into an empty scope or org")
        plan.ids[record.id] = str(row[0])
        plan.existing_scopes.add(record.id)
    if parsed.counts["document"]:
        holds = await (await conn.execute(xq.ORG_HOLDS_DOCUMENTS)).fetchone()
        if holds and holds[0]:
            raise InvalidArgument("refused, nothing was written: this org already has documents or org-level "
                                  "audit rows; restore a whole-org export only into an empty org")
    own_ids = [str(r.id) for r in parsed.records
               if r.type in ("entity", "episode", "fact", "read", "recall_save", "document")]
    new_scope_ids = [s.id for s in scopes if s.id not in plan.existing_scopes]
    taken = await (await conn.execute(xq.IDS_TAKEN, {"ids": own_ids + new_scope_ids})).fetchone()
    plan.keep_ids = not (taken and taken[0])
    for old in own_ids + new_scope_ids:
        plan.ids[old] = old if plan.keep_ids else str(uuid.uuid4())
    audit_ids = [r.id for r in parsed.records if r.type == "audit"]
    taken = await (await conn.execute(xq.AUDIT_IDS_TAKEN, {"ids": audit_ids})).fetchone()
    plan.keep_audit_ids = not (taken and taken[0])
    return plan


async def _insert_all(conn: psycopg.AsyncConnection, records: list[Any], plan: _Plan) -> None:
    """Insert every record in file order; runs of one type go in batches (one round trip each)."""
    batch_sql: str | None = None
    batch: list[dict[str, Any]] = []
    for record in records:
        row = None if _alone(record, plan) else _row(record, plan)
        if batch and (row is None or row[0] != batch_sql or len(batch) >= _BATCH):
            async with conn.cursor() as cur:
                await cur.executemany(batch_sql, batch)  # type: ignore[arg-type]
            batch = []
        if row is None:
            await _insert_alone(conn, record, plan)
        else:
            batch_sql = row[0]
            batch.append(row[1])
    if batch:
        async with conn.cursor() as cur:
            await cur.executemany(batch_sql, batch)  # type: ignore[arg-type]


def _alone(record: Any, plan: _Plan) -> bool:
    """A scope, or an audit row taking a new id (its id goes into the plan), is inserted on its own."""
    return record.type == "scope" or (record.type == "audit" and not plan.keep_audit_ids)


def _row(record: Any, plan: _Plan) -> tuple[str, dict[str, Any]]:
    """The statement and the bind values that restore `record`, every id mapped by `plan`."""
    data = record.model_dump(exclude={"type"})
    own_id = data.get("id")
    for name in _ID_FIELDS:
        if data.get(name) is not None:
            data[name] = plan.ids.get(str(data[name]), data[name])
    if record.type in ("entity", "episode", "fact", "read", "recall_save", "document"):
        data["id"] = plan.ids[str(own_id)]
    if "embedding" in data:
        data["embedding"] = _vector(data["embedding"])
    if record.type == "episode":
        data["metadata"] = Jsonb(data["metadata"])
    if record.type == "read":
        data["scopes"] = [plan.renames.get(s, s) for s in data["scopes"]]
    if record.type == "audit":
        data["before"] = Jsonb(plan.map(data["before"])) if data["before"] is not None else None
        data["after"] = Jsonb(plan.map(data["after"])) if data["after"] is not None else None
        return (xq.INSERT_AUDIT_KEEP_ID if plan.keep_audit_ids else xq.INSERT_AUDIT_NEW_ID), data
    return _INSERT[record.type], data


async def _insert_alone(conn: psycopg.AsyncConnection, record: Any, plan: _Plan) -> None:
    if record.type != "scope":  # an audit row under a new id
        sql, data = _row(record, plan)
        row = await (await conn.execute(sql, data)).fetchone()
        if row and row[0] != record.id:
            plan.ids[f"audit:{record.id}"] = f"audit:{row[0]}"
        return
    data = record.model_dump(exclude={"type"})
    data.update(id=plan.ids.get(record.id, record.id), name=plan.names[record.id])
    if record.name != data["name"]:  # a renamed scope becomes a named scope nobody owns
        data.update(kind=SHARED if data["name"] == SHARED else "named", owner_agent=None)
    await conn.execute(xq.UPDATE_SCOPE if record.id in plan.existing_scopes else xq.INSERT_SCOPE, data)
    if record.embedding_model:  # the restored vectors' model, so a mismatch is still flagged
        await conn.execute(embedding_models.REPLACE, {"scope_id": data["id"], "model": record.embedding_model})
    plan.ids[record.id] = data["id"]


def _vector(value: str | None) -> np.ndarray | None:
    if value is None:
        return None
    try:
        return np.frombuffer(base64.b64decode(value, validate=True), dtype="<f4").astype(np.float32)
    except ValueError:
        raise InvalidArgument("refused: an embedding is not base64 float32") from None


def _import_id(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise InvalidArgument(f"import_id '{value[:64]}' is not a UUID") from None
