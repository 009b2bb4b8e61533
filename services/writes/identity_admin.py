"""A person fixes entity identity: list deferred look-alikes, merge, unmerge, rename (admin only).

A merge never edits a fact or an entity: it records a redirect in `entity_merges` (migration
0015), and everything that resolves entities at read or write time follows the redirects in force
(the view `entity_canonical`). Unmerging sets the row's `undone_at`, so every answer is again
exactly what it was before the merge. A rename is an audited edit of the entity's name (facts
are untouched): the old name stays an alias, and the audit row keeps the name and alias rows
before and after, so renaming back (while nothing else changed its names) restores both
exactly. Every change takes the scope's write lock, so a concurrent write resolves its mentions
either before or after it, never half-way, and is audited (`entity_merged`, `entity_unmerged`,
`entity_renamed`), which `why` shows per entity.
"""

from __future__ import annotations

import uuid
from datetime import UTC
from typing import Any

import psycopg
from psycopg.rows import dict_row

from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.entities import (
    DeferredLookalike,
    EntityDeferredInput,
    EntityDeferredResult,
    EntityMergeInput,
    EntityMergeResult,
    EntityRef,
    EntityRenameInput,
    EntityRenameResult,
    EntityUnmergeInput,
    EntityUnmergeResult,
)
from echo_memory.libs.core.contracts.errors import InvalidArgument, NotFound
from echo_memory.libs.core.contracts.identity import require_admin
from echo_memory.libs.core.contracts.write import Candidate
from echo_memory.libs.server.store.access import (
    Scope,
    accessible_scopes,
    named_or_readable_scopes,
    resolve_scope,
)
from echo_memory.services.writes import identity_queries as q
from echo_memory.services.writes.episode import AuditEntry, audit
from echo_memory.services.writes.queries import SCOPE_WRITE_LOCK


async def entity_deferred(
    conn: psycopg.AsyncConnection, caller: Caller, args: EntityDeferredInput
) -> EntityDeferredResult:
    """Look-alikes waiting for a decision: deferred mentions no later write answered, newest first.

    Every scope the admin may read when `args.scope` is absent; an empty list when none wait.
    Raises ScopeDenied for any caller but the admin identity, NotFound for an unknown scope.
    """
    require_admin(caller, "list deferred entity mentions")
    scopes = await named_or_readable_scopes(conn, caller, args.scope)
    names = {s.id: s.name for s in scopes if s.id is not None}
    if not names:
        return EntityDeferredResult()
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.DEFERRED_WAITING, {"scope_ids": list(names), "limit": args.limit + 1})
        rows = await cur.fetchall()
    found = [
        DeferredLookalike(
            scope=names[str(r["scope_id"])], agent_id=r["agent_id"], mention=r["mention"],
            candidates=[Candidate.model_validate(c) for c in r["candidates"]], times=r["times"],
            first_deferred_at=r["first_deferred_at"], last_deferred_at=r["last_deferred_at"],
        )
        for r in rows[: args.limit]
    ]
    return EntityDeferredResult(deferred=found, more=len(rows) > args.limit)


async def entity_merge(conn: psycopg.AsyncConnection, caller: Caller, args: EntityMergeInput) -> EntityMergeResult:
    """`absorb` (B) becomes an alias of `keep` (A): reads and later writes naming B resolve to A.

    Raises ScopeDenied for any caller but the admin identity; NotFound for an unknown scope or
    entity; InvalidArgument for an empty name, an entity merged into itself, entities of another
    scope, or an entity already absorbed by a merge in force (unmerge it first). Nothing is
    changed on any error.
    """
    require_admin(caller, "merge entities")
    scope = await _write_scope(conn, caller, args.scope)
    keep = await _entity(conn, caller, scope, args.keep, "keep")
    absorb = await _entity(conn, caller, scope, args.absorb, "absorb")
    if keep.entity_id == absorb.entity_id:
        raise InvalidArgument(f"'{args.keep}' and '{args.absorb}' are the same entity ({keep.name}); "
                              "an entity cannot be merged into itself")
    for ref, role in ((absorb, "absorbed"), (keep, "kept")):
        earlier = await _absorbed_by(conn, scope, ref.entity_id)
        if earlier is not None:
            hint = ("unmerge it first" if role == "absorbed"
                    else f"merge into '{earlier['surviving_name']}' instead")
            raise InvalidArgument(f"'{ref.name}' is already merged into '{earlier['surviving_name']}' "
                                  f"(merge {earlier['id']}) and cannot be {role}; {hint}")
    reason = _reason(args.reason, f"a person merged '{absorb.name}' into '{keep.name}'")
    row = await (await conn.execute(q.INSERT_MERGE, {
        "scope_id": scope.id, "absorbed_id": absorb.entity_id, "surviving_id": keep.entity_id,
        "by": caller.agent_id, "reason": reason,
    })).fetchone()
    assert row is not None
    merge_id, merged_at = int(row[0]), row[1]
    following = await _count(conn, q.FACTS_OF_GROUP, {"scope_id": scope.id, "entity_id": absorb.entity_id})
    await audit(conn, AuditEntry(
        caller, scope, kind="entity_merged", entity_id=absorb.entity_id, reason=reason, after={
            "merge_id": merge_id, "absorbed_id": absorb.entity_id, "absorbed": absorb.name,
            "surviving_id": keep.entity_id, "surviving": keep.name, "facts_following": following,
        }))
    return EntityMergeResult(merge_id=merge_id, surviving=keep, absorbed=absorb, facts_following=following,
                             merged_at=merged_at)


async def entity_unmerge(
    conn: psycopg.AsyncConnection, caller: Caller, args: EntityUnmergeInput
) -> EntityUnmergeResult:
    """Undo the merge in force by which `entity` absorbed `alias`: both answer as themselves again.

    The absorbed entity gets back exactly what it had (its facts, names and aliases, and what it
    had absorbed itself); facts written after the merge naming it stay with `entity`, which they
    were resolved to. Raises ScopeDenied for any caller but the admin identity; NotFound for an
    unknown scope or entity; InvalidArgument when `alias` is not an entity `entity` absorbed by a
    merge in force. Nothing is changed on any error.
    """
    require_admin(caller, "unmerge entities")
    scope = await _write_scope(conn, caller, args.scope)
    entity = await _entity(conn, caller, scope, args.entity, "entity")
    alias = args.alias.strip()
    if not alias:
        raise InvalidArgument("alias: the name of the absorbed entity must not be empty")
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.MERGE_TO_UNDO, {"scope_id": scope.id, "surviving_id": entity.entity_id, "alias": alias})
        merge = await cur.fetchone()
    if merge is None:
        raise InvalidArgument(await _not_absorbed(conn, caller, scope, entity, alias))
    reason = _reason(args.reason, f"a person took '{merge['name']}' back out of '{entity.name}'")
    row = await (await conn.execute(q.UNDO_MERGE, {
        "merge_id": merge["id"], "scope_id": scope.id, "by": caller.agent_id, "reason": reason,
    })).fetchone()
    assert row is not None  # the scope lock keeps the merge in force since it was read
    restored = EntityRef(entity_id=str(merge["absorbed_id"]), name=merge["name"], type=merge["type"], scope=scope.name)
    returned = await _count(conn, q.FACTS_OF_GROUP, {"scope_id": scope.id, "entity_id": restored.entity_id})
    await audit(conn, AuditEntry(
        caller, scope, kind="entity_unmerged", entity_id=restored.entity_id, reason=reason, after={
            "merge_id": int(merge["id"]), "absorbed_id": restored.entity_id, "absorbed": restored.name,
            "surviving_id": entity.entity_id, "surviving": entity.name, "facts_returned": returned,
        }))
    return EntityUnmergeResult(merge_id=int(merge["id"]), entity=entity, restored=restored, facts_returned=returned,
                               undone_at=row[0])


async def entity_rename(conn: psycopg.AsyncConnection, caller: Caller, args: EntityRenameInput) -> EntityRenameResult:
    """The entity's name becomes `new_name`; the old name stays an alias (unless only its case changed).

    Raises ScopeDenied for any caller but the admin identity; NotFound for an unknown scope or
    entity; InvalidArgument for an empty name, the name it already has, or a name another entity
    of the scope answers to. Nothing is changed on any error.
    """
    require_admin(caller, "rename entities")
    scope = await _write_scope(conn, caller, args.scope)
    entity = await _entity(conn, caller, scope, args.entity, "entity")
    new_name = args.new_name.strip()
    if not new_name:
        raise InvalidArgument("new_name must not be empty")
    if new_name == entity.name:
        raise InvalidArgument(f"'{entity.name}' already has that name")
    params = {"scope_id": scope.id, "entity_id": entity.entity_id, "name": new_name}
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.NAME_TAKEN, params)
        taken = await cur.fetchone()
    if taken is not None:
        raise InvalidArgument(f"another entity of scope '{scope.name}' already answers to '{new_name}' "
                              f"('{taken['name']}', {taken['id']}); merge them instead")
    before = await _aliases(conn, scope, entity.entity_id)
    undoing = await _undoes_last_rename(conn, scope, entity, new_name, before)
    await conn.execute(q.DROP_OWN_ALIAS, params)
    await conn.execute(q.RENAME_ENTITY, params)
    if undoing is not None:
        await conn.execute(q.DROP_ALIASES, params)
        for row in undoing:
            await conn.execute(q.RESTORE_ALIAS, {**params, **row})
    elif new_name.lower() != entity.name.lower():
        await conn.execute(q.ADD_ALIAS, {**params, "alias": entity.name})
    after = await _aliases(conn, scope, entity.entity_id)
    default = (f"a person renamed '{entity.name}' back to '{new_name}'" if undoing is not None
               else f"a person renamed '{entity.name}' to '{new_name}'")
    await audit(conn, AuditEntry(
        caller, scope, kind="entity_renamed", entity_id=entity.entity_id,
        reason=_reason(args.reason, default),
        before={"name": entity.name, **_alias_state(before)},
        after={"name": new_name, "undid_last_rename": undoing is not None, **_alias_state(after)}))
    renamed = entity.model_copy(update={"name": new_name})
    return EntityRenameResult(entity=renamed, old_name=entity.name, aliases=[a["alias"] for a in after])


async def _undoes_last_rename(
    conn: psycopg.AsyncConnection, scope: Scope, entity: EntityRef, new_name: str, aliases: list[dict[str, str]]
) -> list[dict[str, str]] | None:
    """The alias rows to restore when this rename gives back the name the last rename replaced, else None.

    The last rename is the newest one not already undone (renames back cancel in pairs, like a
    stack). Only while nothing changed the entity's names since it (same name, same aliases) is
    renaming back an exact undo, where the name being left does not stay an alias.
    """
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.RENAMES_OF, {"scope_id": scope.id, "entity_id": entity.entity_id})
        renames = await cur.fetchall()
    last, undone = None, 0
    for row in renames:
        if row["after"].get("undid_last_rename"):
            undone += 1
        elif undone:
            undone -= 1
        else:
            last = row
            break
    if last is None or last["before"].get("name") != new_name or last["after"].get("name") != entity.name:
        return None
    if last["after"].get("alias_rows") != aliases or "alias_rows" not in last["before"]:
        return None
    return list(last["before"]["alias_rows"])


async def _write_scope(conn: psycopg.AsyncConnection, caller: Caller, name: str | None) -> Scope:
    """The scope to change, locked for writing until commit (writes resolve names under the same lock)."""
    scope = await resolve_scope(conn, caller, name, "write")
    await conn.execute(SCOPE_WRITE_LOCK, (scope.id,))
    return scope


async def _entity(conn: psycopg.AsyncConnection, caller: Caller, scope: Scope, ref: str, what: str) -> EntityRef:
    """The entity `ref` names in `scope`: an id, else its stored name, else one of its aliases.

    Raises InvalidArgument for an empty name or an id of an entity in another scope; NotFound otherwise.
    """
    name = ref.strip()
    if not name:
        raise InvalidArgument(f"{what}: an entity name must not be empty")
    async with conn.cursor(row_factory=dict_row) as cur:
        row = None
        if _is_uuid(name):
            readable = [s.id for s in await accessible_scopes(conn, caller, "read") if s.id is not None]
            await cur.execute(q.ENTITY_BY_ID, {"scope_ids": readable, "entity_id": name})
            row = await cur.fetchone()
            if row is not None and str(row["scope_id"]) != scope.id:
                raise InvalidArgument(f"{what}: entity {name} ('{row['name']}') is in another scope than "
                                      f"'{scope.name}'; entities of different scopes cannot be merged or changed "
                                      "together (pass its scope with --scope)")
        for sql in (q.ENTITY_BY_NAME, q.ENTITY_BY_ALIAS):
            if row is None:
                await cur.execute(sql, {"scope_id": scope.id, "name": name})
                row = await cur.fetchone()
    if row is None:
        raise NotFound(f"{what}: no entity named '{name[:100]}' (name, alias or id) in scope '{scope.name}'")
    return EntityRef(entity_id=str(row["id"]), name=row["name"], type=row["type"], scope=scope.name)


async def _not_absorbed(conn: psycopg.AsyncConnection, caller: Caller, scope: Scope, entity: EntityRef,
                        alias: str) -> str:
    """Why `alias` cannot be taken out of `entity`, naming the entity it was merged into when another."""
    base = f"'{alias}' is not an entity that '{entity.name}' absorbed by a merge in force in scope '{scope.name}'"
    try:
        named = await _entity(conn, caller, scope, alias, "alias")
    except (NotFound, InvalidArgument):
        return base + "; `echo-memory why` or get_audit_log with kind entity_merged lists merges"
    earlier = await _absorbed_by(conn, scope, named.entity_id)
    if earlier is None:
        return base + f" ('{named.name}' is not merged into any entity)"
    return base + (f": '{named.name}' was merged into '{earlier['surviving_name']}'; "
                   f"run `echo-memory entities unmerge '{earlier['surviving_name']}' '{named.name}'`")


async def _absorbed_by(conn: psycopg.AsyncConnection, scope: Scope, entity_id: str) -> dict[str, Any] | None:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(q.ABSORBED_BY, {"scope_id": scope.id, "entity_id": entity_id})
        return await cur.fetchone()


async def _aliases(conn: psycopg.AsyncConnection, scope: Scope, entity_id: str) -> list[dict[str, str]]:
    """The entity's alias rows, oldest first, as JSON-ready dicts (text and exact creation time)."""
    rows = await (await conn.execute(q.ALIASES_OF, {"scope_id": scope.id, "entity_id": entity_id})).fetchall()
    return [{"alias": str(r[0]), "created_at": r[1].astimezone(UTC).isoformat()} for r in rows]


def _alias_state(rows: list[dict[str, str]]) -> dict[str, Any]:
    return {"aliases": [r["alias"] for r in rows], "alias_rows": rows}


async def _count(conn: psycopg.AsyncConnection, sql: str, params: dict[str, Any]) -> int:
    row = await (await conn.execute(sql, params)).fetchone()
    return int(row[0]) if row is not None else 0


def _reason(given: str | None, default: str) -> str:
    return given.strip() if given and given.strip() else default


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
