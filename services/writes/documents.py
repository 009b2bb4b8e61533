"""Project memory files: register (CLI `docs sync`), list pending, mark ingested.

A file is identified by (project, path); each distinct content is one `documents` row, never
deleted but by an erasure (`echo-memory forget`), whose content is then refused for good. The
current version has `superseded_at IS NULL`. "Pending" is per agent: a document is
pending for agent A until A marks its current version ingested (after A became current). Per agent,
because agents write to different scopes (their `solo` memory, a team scope) and each needs the file
in the memory it reads; an agent that has ingested it never sees it again until the content changes.

- register_documents: same content as the current version is a no-op (no row, no audit); a new
  path is `new`; other content is `changed` (the old version ends, the new one is pending for
  everyone again — content that changes back to an older version re-uses that row). Files with a
  secret, over MAX_DOCUMENT_BYTES or with erased content are `refused` one by one; the rest of the
  batch is registered.
- pending_documents: the project's current versions this agent has not ingested, by path, with
  content, size and approximate tokens, cut at PENDING_BYTES_BUDGET (at least one) with `more`.
- mark_ingested: records the agent's ingestion of that version (audit `document_ingested`);
  marking it again is `already` and changes nothing.
Documents are not scoped: they belong to the org's project, whatever scope their facts go to.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any, Literal

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.documents import (
    MAX_DOCUMENT_BYTES,
    PENDING_BYTES_BUDGET,
    DocumentStatus,
    MarkIngestedInput,
    MarkIngestedResult,
    PendingDocument,
    PendingDocumentsInput,
    PendingDocumentsResult,
    RegisterDocumentsInput,
    RegisterDocumentsResult,
    RegisteredDocument,
)
from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound
from echo_memory.libs.core.secrets import find_secret
from echo_memory.libs.server.embed import count_tokens
from echo_memory.services.writes.episode import AuditEntry, audit, emit

PROJECT_LOCK = "SELECT pg_advisory_xact_lock(hashtext('echo-memory:documents:' || %s))"
CURRENT_VERSION = """
SELECT id, content_hash FROM documents WHERE project = %s AND path = %s AND superseded_at IS NULL
"""
VERSION_BY_HASH = "SELECT id FROM documents WHERE project = %s AND path = %s AND content_hash = %s"
END_VERSION = "UPDATE documents SET superseded_at = now() WHERE id = %s AND superseded_at IS NULL"
REVIVE_VERSION = "UPDATE documents SET superseded_at = NULL, current_since = now() WHERE id = %s"
INSERT_VERSION = """
INSERT INTO documents (project, path, content_hash, content, size, current_since)
VALUES (%s, %s, %s, %s, %s, now()) RETURNING id
"""
# Content is fetched only for the documents that fit in the answer (CONTENTS), not for every candidate.
PENDING = """
SELECT d.id, d.path, d.project, d.content_hash, d.size, d.current_since
FROM documents d
WHERE d.project = %(project)s AND d.superseded_at IS NULL
  AND NOT EXISTS (
    SELECT 1 FROM document_ingestions i
    WHERE i.document_id = d.id AND i.agent_id = %(agent_id)s AND i.ingested_at >= d.current_since
  )
ORDER BY d.path
LIMIT %(limit)s
"""
CONTENTS = "SELECT id, content FROM documents WHERE id = ANY(%s)"
PROJECT_EXISTS = "SELECT EXISTS (SELECT 1 FROM documents WHERE project = %s)"
DOCUMENT = "SELECT id, project, path, content_hash, current_since FROM documents WHERE id = %s"
INGESTION = "SELECT ingested_at FROM document_ingestions WHERE document_id = %s AND agent_id = %s"
RECORD_INGESTION = """
INSERT INTO document_ingestions (document_id, agent_id, content_hash) VALUES (%s, %s, %s)
ON CONFLICT (document_id, agent_id) DO UPDATE SET ingested_at = now(), content_hash = EXCLUDED.content_hash
"""


# Content hashes an erasure (echo-memory forget) took away: such content is never registered again.
ERASED_CONTENT = """
SELECT h FROM erasures e, jsonb_array_elements_text(e.erased_ids->'document_hashes') AS h WHERE h = ANY(%s::text[])
"""


def content_hash(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode("utf-8")).hexdigest()


async def register_documents(
    conn: psycopg.AsyncConnection, caller: Caller, args: RegisterDocumentsInput
) -> RegisterDocumentsResult:
    """Register each file's content; see the module docstring for the per-file status."""
    paths = [d.path for d in args.documents]
    if len(set(paths)) != len(paths):
        raise InvalidArgument("documents: each path may appear once per call")
    await conn.execute(PROJECT_LOCK, (args.project,))
    hashes = [content_hash(d.content) for d in args.documents]
    erased = {r[0] for r in await (await conn.execute(ERASED_CONTENT, (hashes,))).fetchall()}
    results = []
    for doc in args.documents:
        size = len(doc.content.encode("utf-8"))
        if size > MAX_DOCUMENT_BYTES:
            results.append(RegisteredDocument(path=doc.path, status="refused", size=size,
                                              reason=f"larger than {MAX_DOCUMENT_BYTES} bytes"))
            continue
        kind = find_secret(doc.content) or find_secret(doc.path)
        if kind:
            results.append(RegisteredDocument(
                path=doc.path, status="refused", size=size,
                reason=f"contains {kind}; secrets are never stored (move it out of the file)"))
            continue
        if content_hash(doc.content) in erased:
            results.append(RegisteredDocument(
                path=doc.path, status="refused", size=size,
                reason="this content was erased (echo-memory forget); change the file to register it again"))
            continue
        results.append(await _register_one(conn, caller, args.project, doc.path, doc.content, size))
    return RegisterDocumentsResult(project=args.project, documents=results)


async def _register_one(
    conn: psycopg.AsyncConnection, caller: Caller, project: str, path: str, content: str, size: int
) -> RegisteredDocument:
    digest = content_hash(content)
    current = await (await conn.execute(CURRENT_VERSION, (project, path))).fetchone()
    if current is not None and current[1] == digest:
        return RegisteredDocument(path=path, status="unchanged", document_id=str(current[0]),
                                  content_hash=digest, size=size)
    if current is not None:
        await conn.execute(END_VERSION, (current[0],))
    earlier = await (await conn.execute(VERSION_BY_HASH, (project, path, digest))).fetchone()
    if earlier is not None:
        document_id = str(earlier[0])
        await conn.execute(REVIVE_VERSION, (document_id,))
    else:
        row = await (await conn.execute(INSERT_VERSION, (project, path, digest, content, size))).fetchone()
        document_id = str(row[0])  # type: ignore[index]
    status: DocumentStatus = "new" if current is None else "changed"
    after = {"document_id": document_id, "project": project, "path": path, "content_hash": digest, "size": size,
             "status": status, "previous_hash": current[1] if current is not None else None}
    await audit(conn, AuditEntry(
        caller, None, kind="document_registered", after=after,
        reason=f"{caller.agent_id} registered {status} content for {project}:{path}"))
    await emit(conn, caller, "document.registered", after)
    return RegisteredDocument(path=path, status=status, document_id=document_id, content_hash=digest, size=size)


async def pending_documents(
    conn: psycopg.AsyncConnection, caller: Caller, args: PendingDocumentsInput
) -> PendingDocumentsResult:
    """The project's documents this agent has not ingested; an empty list when none.

    `args.project` is a registered project's name, or a path whose last component is one (what an
    agent knows is often its working directory); the result says which matched, and when none did,
    `matched` is "none" with a note and the list is empty.
    """
    project, matched = await _match_project(conn, args.project)
    if project is None:
        return PendingDocumentsResult(
            documents=[], project=None, matched="none",
            note=f"no documents are registered for a project named '{args.project}'"
            + (f" or '{_last_component(args.project)}'" if _last_component(args.project) not in ("", args.project) else "")
            + "; register them with `echo-memory docs sync PATH --project NAME`",
        )
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(PENDING, {"project": project, "agent_id": caller.agent_id, "limit": args.limit + 1})
        rows = await cur.fetchall()
    chosen: list[dict[str, Any]] = []
    spent = 0
    for row in rows[: args.limit]:
        if chosen and spent + row["size"] > PENDING_BYTES_BUDGET:
            break
        spent += row["size"]
        chosen.append(row)
    contents: dict[Any, str] = {}
    if chosen:
        found = await (await conn.execute(CONTENTS, ([r["id"] for r in chosen],))).fetchall()
        contents = {r[0]: r[1] for r in found}
    documents = [
        PendingDocument(
            document_id=str(r["id"]), path=r["path"], project=r["project"], content_hash=r["content_hash"],
            content=contents[r["id"]], size=r["size"],
            approx_tokens=count_tokens(contents[r["id"]]) if contents[r["id"]] else 0, registered_at=r["current_since"])
        for r in chosen
    ]
    return PendingDocumentsResult(documents=documents, more=len(rows) > len(documents), project=project, matched=matched)


def _last_component(project: str) -> str:
    return project.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


async def _match_project(conn: psycopg.AsyncConnection, project: str) -> tuple[str | None, Literal["name", "path"]]:
    """The registered project `project` names: itself, else its last path component (docs sync's default name)."""
    if (await (await conn.execute(PROJECT_EXISTS, (project,))).fetchone())[0]:  # type: ignore[index]
        return project, "name"
    name = _last_component(project)
    if name and name != project and (await (await conn.execute(PROJECT_EXISTS, (name,))).fetchone())[0]:  # type: ignore[index]
        return name, "path"
    return None, "path"


async def mark_ingested(
    conn: psycopg.AsyncConnection, caller: Caller, args: MarkIngestedInput
) -> MarkIngestedResult:
    """Record that this agent ingested the document's version; raises NotFound or InvalidArgument."""
    try:
        document_id = str(uuid.UUID(args.document_id))
    except ValueError:
        raise InvalidArgument(f"document_id '{args.document_id[:64]}' is not an id pending_documents returned") from None
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(DOCUMENT, (document_id,))
        doc = await cur.fetchone()
    if doc is None:
        raise NotFound(f"document {document_id} does not exist")
    if args.content_hash is not None and args.content_hash != doc["content_hash"]:
        raise InvalidArgument(
            f"document {document_id} has content hash {doc['content_hash']}, not {args.content_hash}; "
            "call pending_documents again for the current content"
        )
    await conn.execute(PROJECT_LOCK, (doc["project"],))
    seen = await (await conn.execute(INGESTION, (document_id, caller.agent_id))).fetchone()
    if seen is not None and seen[0] >= doc["current_since"]:
        return MarkIngestedResult(document_id=document_id, content_hash=doc["content_hash"], already=True)
    await conn.execute(RECORD_INGESTION, (document_id, caller.agent_id, doc["content_hash"]))
    await audit(conn, AuditEntry(
        caller, None, kind="document_ingested",
        after={"document_id": document_id, "project": doc["project"], "path": doc["path"],
               "content_hash": doc["content_hash"]},
        reason=f"{caller.agent_id} ingested {doc['project']}:{doc['path']}"))
    return MarkIngestedResult(document_id=document_id, content_hash=doc["content_hash"])
