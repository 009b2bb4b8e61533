"""Digest abstracts: what to send the user's model, the checked store, and the listing.

The service never calls a model. `echo-memory consolidate abstract` (libs/local/llm/abstracts.py)
asks for the digests still without an abstract (`abstract_candidates`), has the user's model write
sentences citing member facts, and sends them to `write_abstract`, which runs every check
(abstract_check.py) itself: a caller that skips the CLI gets the same refusals. A stored abstract
belongs to one digest version, is audited post-hoc, and never changes a fact. Owned here: the
`digest_abstracts` table (migration 0020). Erasure deletes abstracts in services/writes/forget.py.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.consolidation import (
    MAX_MEMBERS_SENT,
    AbstractCandidate,
    AbstractCandidatesInput,
    AbstractCandidatesResult,
    CitedSentence,
    DigestAbstract,
    DigestAbstractsInput,
    DigestAbstractsResult,
    MemberFact,
    WriteAbstractInput,
    WriteAbstractResult,
)
from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound, ScopeDenied
from echo_memory.libs.core.contracts.framing import MEMORY_NOTICE, frame_text
from echo_memory.libs.server.embed import count_tokens
from echo_memory.libs.server.store import access
from echo_memory.libs.server.store.scopes import SCOPE_WRITE_LOCK
from echo_memory.services.consolidation.abstract_check import Member, check_abstract

EMPTY = ("no digest abstracts yet: `echo-memory consolidate abstract --write` has your own model write them "
         "(docs/distil.md)")

# The current digests of the scopes without an abstract, in id order (the cursor is the last id).
CANDIDATES = """
SELECT d.id::text AS digest_id, d.version, d.kind, d.scope_id::text AS scope_id, d.member_ids::text[] AS member_ids,
       CASE WHEN d.kind = 'entity' THEN
           (SELECT e.name FROM entities e WHERE e.scope_id = d.scope_id AND e.id = d.subject_id) END AS entity
FROM digests d
WHERE d.scope_id = ANY(%(scope_ids)s::uuid[]) AND d.valid_to IS NULL
  AND (%(after)s::uuid IS NULL OR d.id > %(after)s::uuid)
  AND NOT EXISTS (SELECT 1 FROM digest_abstracts a WHERE a.scope_id = d.scope_id AND a.digest_id = d.id)
ORDER BY d.id
LIMIT %(limit)s
"""

MEMBERS = """
SELECT f.id::text AS id, f.text, f.t_invalid IS NULL AS current, f.written_at
FROM facts f
WHERE f.scope_id = ANY(%(scope_ids)s::uuid[]) AND f.id = ANY(%(ids)s::uuid[])
ORDER BY f.written_at DESC, f.id
"""

# The digest an abstract is for; FOR UPDATE in a write, so a consolidation run cannot end the
# version between the check and the insert (its END_DIGEST waits for this transaction).
DIGEST = """
SELECT d.id::text AS digest_id, d.scope_id::text AS scope_id, s.name AS scope_name, d.version, d.valid_to,
       d.member_ids::text[] AS member_ids,
       EXISTS (SELECT 1 FROM digest_abstracts a WHERE a.scope_id = d.scope_id AND a.digest_id = d.id) AS has_abstract
FROM digests d JOIN scopes s ON s.id = d.scope_id
WHERE d.id = %(digest_id)s
"""
DIGEST_FOR_UPDATE = DIGEST + "FOR UPDATE OF d"

INSERT_ABSTRACT = """
INSERT INTO digest_abstracts (scope_id, digest_id, text, token_count, sentences, cited_ids, model, written_by)
VALUES (%(scope_id)s, %(digest_id)s, %(text)s, %(token_count)s, %(sentences)s, %(cited_ids)s::uuid[], %(model)s, %(written_by)s)
RETURNING id::text
"""

INSERT_AUDIT = """
INSERT INTO audit_log (scope_id, kind, agent_id, session_id, tool, after, reason, post_hoc)
VALUES (%(scope_id)s, 'digest_abstract_written', %(agent_id)s, %(session_id)s, %(tool)s, %(after)s, %(reason)s, true)
"""

# Abstracts of current digest versions only: a rebuilt digest does not inherit its predecessor's.
LIST = """
SELECT a.id::text AS abstract_id, a.digest_id::text AS digest_id, d.kind, s.name AS scope_name, a.sentences, a.text,
       a.model, a.written_by, a.created_at,
       CASE WHEN d.kind = 'entity' THEN
           (SELECT e.name FROM entities e WHERE e.scope_id = d.scope_id AND e.id = d.subject_id) END AS entity
FROM digest_abstracts a
JOIN digests d ON d.id = a.digest_id AND d.scope_id = a.scope_id
JOIN scopes s ON s.id = a.scope_id
WHERE a.scope_id = ANY(%(scope_ids)s::uuid[]) AND d.valid_to IS NULL
ORDER BY a.created_at DESC, a.id
LIMIT %(limit)s
"""


def _uuid(value: str, what: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise InvalidArgument(f"{what} {value[:64]!r} is not a UUID") from None


async def _scopes(conn: psycopg.AsyncConnection, caller: Caller, name: str | None, mode: access.Mode
                  ) -> list[access.Scope]:
    if name is None:
        return await access.accessible_scopes(conn, caller, mode)
    return [await access.resolve_scope(conn, caller, name, mode)]


async def candidates(conn: psycopg.AsyncConnection, caller: Caller, args: AbstractCandidatesInput
                     ) -> AbstractCandidatesResult:
    """Current digests without an abstract in the scopes the caller may write (or the one named), each
    with its current member facts; empty when none is left. Raises what scope resolution raises for a
    named scope (ScopeDenied, NotFound), InvalidArgument for a cursor that is not one of ours.
    """
    scopes = [s for s in await _scopes(conn, caller, args.scope, "write") if s.id is not None]
    names = {s.id: s.name for s in scopes}
    after = _uuid(args.cursor, "cursor") if args.cursor else None
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(CANDIDATES, {"scope_ids": list(names), "after": after, "limit": args.limit + 1})
        rows: list[dict[str, Any]] = await cur.fetchall()
        page = rows[: args.limit]
        await cur.execute(MEMBERS, {"scope_ids": list(names), "ids": sorted({m for r in page for m in r["member_ids"]})})
        facts = {r["id"]: r for r in await cur.fetchall() if r["current"]}
    digests = []
    for r in page:
        current = sorted((facts[m] for m in r["member_ids"] if m in facts),
                         key=lambda f: (f["written_at"], f["id"]), reverse=True)
        digests.append(AbstractCandidate(
            digest_id=r["digest_id"], version=r["version"], kind=r["kind"], entity=r["entity"],
            scope=names[r["scope_id"]], members_total=len(current),
            members=[MemberFact(fact_id=f["id"], text=f["text"]) for f in current[:MAX_MEMBERS_SENT]]))
    cursor = page[-1]["digest_id"] if len(rows) > args.limit else None
    return AbstractCandidatesResult(digests=digests, next_cursor=cursor)


async def write_abstract(conn: psycopg.AsyncConnection, caller: Caller, args: WriteAbstractInput) -> WriteAbstractResult:
    """Check an abstract against its digest version's member facts; store and audit it unless a dry run.

    A dry run answers the verdict with every problem. A write stores the abstract only when every
    check passes, and raises InvalidArgument naming every problem (sentence, reason, what) otherwise;
    nothing is stored then. Also InvalidArgument for a digest id that is not a UUID, a digest version
    that a rebuild replaced, or one that already has an abstract; NotFound for an unknown digest;
    ScopeDenied when the caller may not write the digest's scope.
    """
    digest_id = _uuid(args.digest_id, "digest id")
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(DIGEST, {"digest_id": digest_id})
        digest = await cur.fetchone()
        if digest is None:
            raise NotFound(f"no digest {digest_id} (`echo-memory consolidate abstract` lists those without one)")
        writable = {s.id: s.name for s in await access.accessible_scopes(conn, caller, "write")}
        if digest["scope_id"] not in writable:
            raise ScopeDenied(f"agent '{caller.agent_id}' may not write scope '{access.public_name(digest['scope_name'])}', "
                              "the scope of this digest")
        if not args.dry_run:
            # Under the scope's write lock an erasure cannot remove a cited fact between check and insert.
            await cur.execute(SCOPE_WRITE_LOCK, (digest["scope_id"],))
            await cur.execute(DIGEST_FOR_UPDATE, {"digest_id": digest_id})
            digest = await cur.fetchone()
            assert digest is not None  # the lock keeps an erasure out; digests are never deleted otherwise
        if digest["valid_to"] is not None:
            raise InvalidArgument(f"digest {digest_id} (version {digest['version']}) was replaced by a later "
                                  "consolidation run; an abstract belongs to one version: list the candidates again")
        if digest["has_abstract"]:
            raise InvalidArgument(f"digest {digest_id} already has an abstract; a rebuilt digest starts without one")
        await cur.execute(MEMBERS, {"scope_ids": [digest["scope_id"]], "ids": digest["member_ids"]})
        members = {r["id"]: Member(text=r["text"], current=r["current"]) for r in await cur.fetchall()}
    scope = writable[digest["scope_id"]]
    sentences = [(s.text, [c.strip().lower() for c in s.cites]) for s in args.sentences]
    problems = check_abstract(sentences, members)
    if args.dry_run:
        return WriteAbstractResult(dry_run=True, accepted=not problems, stored=False, digest_id=digest_id, scope=scope,
                                   problems=problems)
    if problems:
        raise InvalidArgument("abstract refused, nothing stored: " + "; ".join(
            f"sentence {p.sentence} ({p.reason}): {p.detail}" if p.sentence else f"{p.reason}: {p.detail}"
            for p in problems))
    cited = [list(dict.fromkeys(c)) for _, c in sentences]
    stored = [{"text": text, "cites": c} for (text, _), c in zip(sentences, cited, strict=True)]
    text = " ".join(s.text for s in args.sentences)
    row = await (await conn.execute(INSERT_ABSTRACT, {
        "scope_id": digest["scope_id"], "digest_id": digest_id, "text": text, "token_count": count_tokens(text),
        "sentences": json.dumps(stored),
        "cited_ids": sorted({c for cs in cited for c in cs}), "model": args.model,
        "written_by": caller.agent_id})).fetchone()
    abstract_id = str(row[0])  # type: ignore[index]
    await conn.execute(INSERT_AUDIT, {
        "scope_id": digest["scope_id"], "agent_id": caller.agent_id, "session_id": args.session_id,
        "tool": caller.tool,
        "after": json.dumps({"abstract_id": abstract_id, "digest_id": digest_id, "digest_version": digest["version"],
                             "model": args.model, "sentences": stored}),
        "reason": f"{caller.agent_id} stored an abstract of digest {digest_id} written by the model {args.model}; "
                  "every sentence cites member facts that hold its numbers, dates and names"})
    return WriteAbstractResult(dry_run=False, accepted=True, stored=True, abstract_id=abstract_id, digest_id=digest_id,
                               scope=scope)


def _line(item: DigestAbstract) -> str:
    about = f"entity {item.entity}" if item.entity else "a topic"
    body = " ".join(f"{s.text} [cites {', '.join(s.cites)}]" for s in item.sentences)
    return (f"[abstract {item.abstract_id} of the digest of {about}, scope {item.scope}; written by your own model "
            f"{item.model}, not by an agent] {body}")


async def list_abstracts(conn: psycopg.AsyncConnection, caller: Caller, args: DigestAbstractsInput
                         ) -> DigestAbstractsResult:
    """Abstracts of current digest versions in the scopes the caller may read (or names), newest first,
    framed as recalled data and marked model-written; empty with a note when there are none.

    Raises what scope resolution raises for a scope the caller may not read or that does not exist.
    """
    scopes = await access.named_or_readable_scopes(conn, caller, args.scope)
    names = {s.stored_name: s.name for s in scopes}
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(LIST, {"scope_ids": [s.id for s in scopes if s.id is not None], "limit": args.limit})
        rows = await cur.fetchall()
    items = [DigestAbstract(
        abstract_id=r["abstract_id"], digest_id=r["digest_id"], kind=r["kind"], entity=r["entity"],
        scope=names.get(r["scope_name"]) or r["scope_name"], text=r["text"], model=r["model"],
        written_by=r["written_by"], written_at=r["created_at"],
        sentences=[CitedSentence.model_validate(s) for s in r["sentences"]]) for r in rows]
    heading = (f"Digest abstracts: {len(items)}, each written by the user's own model and checked against the "
               "facts its sentences cite (the cited facts are the evidence)")
    text = frame_text("\n".join([heading, *(_line(i) for i in items)]))
    return DigestAbstractsResult(memory_notice=MEMORY_NOTICE, items=items, text=text, note=None if items else EMPTY)
