"""`echo-memory entities list --deferred | merge | unmerge | rename`: a person fixes entity identity.

Each subcommand is one request to the writes service as the org's admin identity (verbs
`entity_deferred`, `entity_merge`, `entity_unmerge`, `entity_rename`), so the operator and any
tool acting as the admin reach the same code. A merge is a redirect, never an edit of facts:
`unmerge` brings back exactly what was there (docs/operations.md, "Fixing entity identity").
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import BaseModel

from echo_memory.libs.core.config import Settings
from echo_memory.libs.core.contracts.entities import (
    EntityDeferredInput,
    EntityMergeInput,
    EntityRenameInput,
    EntityUnmergeInput,
)
from echo_memory.libs.core.contracts.verbs import ENTITY_DEFERRED, ENTITY_MERGE, ENTITY_RENAME, ENTITY_UNMERGE
from echo_memory.libs.local.cli.output import print_json
from echo_memory.libs.local.connection import admin_command


def register(sub: Any) -> None:
    parser = sub.add_parser("entities", help="fix entity identity: list deferred look-alikes, merge, unmerge, rename")
    commands = parser.add_subparsers(dest="entities_command", required=True)

    listing = commands.add_parser("list", help="entities waiting for a decision")
    listing.add_argument("--deferred", action="store_true", required=True,
                         help="the look-alikes writes deferred, with their candidates and scores")
    listing.add_argument("--limit", type=int, default=100, help="at most this many (1-500)")
    listing.set_defaults(func=deferred)

    merge = commands.add_parser("merge", help="B becomes an alias of A; facts naming B answer as A")
    merge.add_argument("keep", metavar="A", help="the entity that stays (name, alias or id)")
    merge.add_argument("absorb", metavar="B", help="the entity that becomes A's alias")
    merge.set_defaults(func=merge_entities)

    unmerge = commands.add_parser("unmerge", help="ALIAS and the facts it brought become their own entity again")
    unmerge.add_argument("entity", metavar="A", help="the entity that absorbed ALIAS (name, alias or id)")
    unmerge.add_argument("alias", metavar="ALIAS", help="the entity A absorbed (its name, an alias or its id)")
    unmerge.set_defaults(func=unmerge_entities)

    rename = commands.add_parser("rename", help="give A a new name; the old name stays an alias")
    rename.add_argument("entity", metavar="A", help="the entity to rename (name, alias or id)")
    rename.add_argument("new_name", metavar="NEW_NAME", help="its new name; the old one stays an alias")
    rename.set_defaults(func=rename_entity)

    for sub_parser in (listing, merge, unmerge, rename):
        sub_parser.add_argument("--scope", default=None,
                                help="the scope (default: shared; for list, every scope the admin may read)")
        sub_parser.add_argument("--json", action="store_true", help="print the result as JSON")
    for sub_parser in (merge, unmerge, rename):
        sub_parser.add_argument("--reason", default=None, help="why, recorded in the audit log")


def deferred(settings: Settings, args: argparse.Namespace) -> int:
    """Prints each waiting mention with its candidates, or that none wait; exit 1 with one line on an error."""
    found = admin_command(settings, ENTITY_DEFERRED, EntityDeferredInput(scope=args.scope, limit=args.limit),
                          "entities list")
    if found is None:
        return 1
    if _json(args, found):
        return 0
    if not found.deferred:
        print("no deferred look-alikes are waiting for a decision")
        return 0
    for d in found.deferred:
        print(f"{d.mention!r} (scope {d.scope}, agent {d.agent_id}, deferred {d.times}x, "
              f"last {d.last_deferred_at.isoformat(timespec='seconds')})")
        for c in d.candidates:
            print(f"    {c.name!r} {c.entity_id} score {c.score:.3f} cosine {c.similarity:.3f} ({c.rule})")
    if found.more:
        print(f"(more than {args.limit}; raise --limit to see them)")
    return 0


def merge_entities(settings: Settings, args: argparse.Namespace) -> int:
    """Prints what was merged and how many facts follow; exit 1 with one line when refused."""
    request = EntityMergeInput(keep=args.keep, absorb=args.absorb, scope=args.scope, reason=args.reason)
    merged = admin_command(settings, ENTITY_MERGE, request, "entities merge")
    if merged is None:
        return 1
    if not _json(args, merged):
        print(f"merged {merged.absorbed.name!r} into {merged.surviving.name!r} (scope {merged.surviving.scope}, "
              f"merge {merged.merge_id}): {merged.facts_following} facts in force now answer as "
              f"{merged.surviving.name!r}; undo with `echo-memory entities unmerge "
              f"{merged.surviving.entity_id} {merged.absorbed.entity_id}`")
    return 0


def unmerge_entities(settings: Settings, args: argparse.Namespace) -> int:
    """Prints the entity given back and how many facts returned to it; exit 1 with one line when refused."""
    request = EntityUnmergeInput(entity=args.entity, alias=args.alias, scope=args.scope, reason=args.reason)
    undone = admin_command(settings, ENTITY_UNMERGE, request, "entities unmerge")
    if undone is None:
        return 1
    if not _json(args, undone):
        print(f"{undone.restored.name!r} is its own entity again (out of {undone.entity.name!r}, merge "
              f"{undone.merge_id} undone): {undone.facts_returned} facts in force answer as it")
    return 0


def rename_entity(settings: Settings, args: argparse.Namespace) -> int:
    """Prints the new name and the aliases; exit 1 with one line when refused."""
    request = EntityRenameInput(entity=args.entity, new_name=args.new_name, scope=args.scope, reason=args.reason)
    renamed = admin_command(settings, ENTITY_RENAME, request, "entities rename")
    if renamed is None:
        return 1
    if not _json(args, renamed):
        aliases = ", ".join(repr(a) for a in renamed.aliases) or "none"
        print(f"renamed {renamed.old_name!r} to {renamed.entity.name!r} (scope {renamed.entity.scope}); "
              f"aliases: {aliases}")
    return 0


def _json(args: argparse.Namespace, result: BaseModel) -> bool:
    if args.json:
        print_json(result)
    return bool(args.json)
