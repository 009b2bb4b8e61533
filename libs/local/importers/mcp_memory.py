"""The MCP reference memory server's knowledge graph (`@modelcontextprotocol/server-memory`).

Its file is JSON Lines: `{"type": "entity", "name", "entityType", "observations": [...]}` and
`{"type": "relation", "from", "to", "relationType"}` (the server's `saveGraph`). Mapped as:

- an entity becomes an entity of its type, with one fact "<name> is a <type>" (relation `is a`)
  so that an entity without observations or relations is stored too;
- each observation becomes a fact about its entity, "<name>: <observation>", on its own edge
  (relation `observed #<digest of the text>`: an observation has no id but its text);
- each relation becomes the fact "<from> <relationType> <to>" between the two entities.

The file is read twice, line by line, so memory stays flat whatever its size: once for the
entities' types (a relation may name an entity whose line comes later), once for the records.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from echo_memory.libs.local.importers.records import EntityRef, PlannedFact, SourceRecord, checked, digest, refused

SOURCE = "mcp-memory"
TYPE_RELATION = "is a"
OBSERVATION_RELATION = "observed #"
UNKNOWN_TYPE = "entity"  # a relation's endpoint that has no entity line of its own


def observation_relation(text: str) -> str:
    return f"{OBSERVATION_RELATION}{digest(text, 8)}"


def _lines(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, parsed object or None, problem) for every non-blank line."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield number, None, f"not UTF-8 ({exc.reason} at byte {exc.start})"
                continue
            if not text.strip():
                continue
            try:
                yield number, json.loads(text), None
            except json.JSONDecodeError as exc:
                yield number, None, f"not JSON ({exc.msg} at column {exc.colno})"


def _str(item: dict[str, Any], field: str) -> str | None:
    value = item.get(field)
    return value if isinstance(value, str) else None


def entity_types(path: Path) -> dict[str, str]:
    """Each entity line's name → type (the first line of a name wins, as the server keeps one)."""
    types: dict[str, str] = {}
    for _, item, _ in _lines(path):
        if isinstance(item, dict) and item.get("type") == "entity":
            name, kind = _str(item, "name"), _str(item, "entityType")
            if name and kind and name not in types:
                types[name] = kind
    return types


def read(path: Path) -> Iterator[SourceRecord]:
    """Every record of the file in order; malformed lines come back refused with their line number."""
    session = f"{SOURCE} {path.name}"
    types = entity_types(path)
    for number, item, problem in _lines(path):
        where = f"line {number}"
        if problem is not None:
            yield refused(f"line:{number}", "line", where, f"{where}: {problem}", session)
            continue
        if not isinstance(item, dict):
            yield refused(f"line:{number}", "line", where, f"{where}: not a JSON object", session)
        elif item.get("type") == "entity":
            yield from _entity(item, where, number, session)
        elif item.get("type") == "relation":
            yield _relation(item, where, number, session, types)
        else:
            yield refused(f"line:{number}", "line", where,
                          f"{where}: type {str(item.get('type'))[:40]!r} is neither 'entity' nor 'relation'", session)


def _entity(item: dict[str, Any], where: str, number: int, session: str) -> Iterator[SourceRecord]:
    name, kind, observations = _str(item, "name"), _str(item, "entityType"), item.get("observations", [])
    if not name or not kind:
        yield refused(f"line:{number}", "entity", where, f"{where}: an entity needs a string name and entityType",
                      session)
        return
    entity = EntityRef(name=name, type=kind)
    yield checked(SourceRecord(
        key=f"entity:{name}", kind="entity", where=where, entities=[entity], session=session,
        fact=PlannedFact(source=name, target=name, relation=TYPE_RELATION, text=f"{name} is a {kind}")))
    if not isinstance(observations, list):
        yield refused(f"observations:{name}", "observation", where,
                      f"{where}: observations of '{name[:80]}' are not a list", session)
        return
    for index, observation in enumerate(observations, start=1):
        at = f"{where}, observation {index}"
        if not isinstance(observation, str):
            yield refused(f"observation:{name}:{index}", "observation", at, f"{at}: not a string", session)
            continue
        yield checked(SourceRecord(
            key=f"observation:{name}:{digest(observation)}", kind="observation", where=at, entities=[entity],
            session=session, fact=PlannedFact(source=name, target=name, relation=observation_relation(observation),
                                              text=f"{name}: {observation}")))


def _relation(item: dict[str, Any], where: str, number: int, session: str, types: dict[str, str]) -> SourceRecord:
    source, target, relation = _str(item, "from"), _str(item, "to"), _str(item, "relationType")
    if not source or not target or not relation:
        return refused(f"line:{number}", "relation", where,
                       f"{where}: a relation needs string from, to and relationType", session)
    ends = [EntityRef(name=n, type=types.get(n, UNKNOWN_TYPE)) for n in dict.fromkeys((source, target))]
    return checked(SourceRecord(
        key=f"relation:{source}\x1f{relation}\x1f{target}", kind="relation", where=where, entities=ends,
        session=session, fact=PlannedFact(source=source, target=target, relation=relation,
                                          text=f"{source} {relation} {target}")))
