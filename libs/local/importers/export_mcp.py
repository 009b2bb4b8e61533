"""`echo-memory export --format mcp-memory`: the current graph in the MCP reference memory server's format.

The server's file is JSON Lines of `{"type": "entity", "name", "entityType", "observations"}`
and `{"type": "relation", "from", "to", "relationType"}`, entity lines first (its `saveGraph`).
Read from the audit service's `export` pages (the admin's whole-org or one-scope read), so the
output is what the store holds now:

- every entity, once per name (the format names entities by name alone: entities of one name in
  several scopes become one, counted in the summary);
- a current fact from an entity to itself is an observation of it (the `<name>: ` that
  `import --from mcp-memory` puts before an observation is taken off again); the plain type sentence
  "<name> is a <type>" is not repeated, the entity line holds the type;
- a current fact between two entities is a relation.

What the format cannot hold is counted in the summary, never silently left out: ended versions,
validity times, provenance, confidence and causal hints, aliases, episodes, and the sentence of a
relation that says more than "<from> <relation> <to>".
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from echo_memory.libs.core.contracts.audit import MAX_EXPORT_PAGE, EntityRecord, ExportPage, FactRecord

Call = Callable[[str, str, dict[str, Any], float], Awaitable[dict[str, Any]]]


@dataclass
class McpGraph:
    entities: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> entity line
    relations: dict[tuple[str, str, str], None] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # entity id -> name
    not_held: dict[str, int] = field(default_factory=dict)

    def lose(self, what: str, n: int = 1) -> None:
        self.not_held[what] = self.not_held.get(what, 0) + n

    def add_entity(self, record: EntityRecord) -> None:
        name = record.name
        self.names[record.id] = name
        if name in self.entities:
            self.lose("entities of one name in several scopes (merged into one)")
            return
        self.entities[name] = {"type": "entity", "name": name, "entityType": record.entity_type, "observations": []}

    def add_fact(self, record: FactRecord) -> None:
        if record.t_invalid is not None:
            self.lose("ended fact versions (the format holds only what is current)")
            return
        self.lose("validity times of current facts")
        self.lose("provenance of current facts (agent, tool, session, project)")
        if record.confidence != "extracted" or record.causal_hint:
            self.lose("confidence other than 'extracted' or a causal hint")
        source, target = self.names[record.source_entity], self.names[record.target_entity]
        relation, text = record.relation, record.text
        if source == target:
            entity = self.entities[source]
            if relation == "is a" and text == f"{source} is a {entity['entityType']}":
                return
            observation = text.removeprefix(f"{source}: ")
            if observation not in entity["observations"]:
                entity["observations"].append(observation)
            return
        if text != f"{source} {relation} {target}":
            self.lose("sentences of relations (only from, relationType and to are kept)")
        edge = (source, target, relation)
        if edge in self.relations:
            self.lose("relations of one name pair in several scopes (merged into one)")
        self.relations[edge] = None

    def lines(self) -> list[str]:
        out = [json.dumps(e, ensure_ascii=False) for e in self.entities.values()]
        out += [json.dumps({"type": "relation", "from": s, "to": t, "relationType": r}, ensure_ascii=False)
                for s, t, r in self.relations]
        return out

    def summary(self) -> dict[str, Any]:
        return {"entities": len(self.entities),
                "observations": sum(len(e["observations"]) for e in self.entities.values()),
                "relations": len(self.relations), "not_held": dict(sorted(self.not_held.items()))}


OTHER_SECTIONS = {"alias": "aliases", "episode": "episodes (raw turns and documents)", "read": "reads",
                  "read_result": "reads", "recall_save": "recall saves", "document": "documents",
                  "document_ingestion": "documents", "audit": "audit rows"}


async def export_mcp_memory(call: Call, out: TextIO, *, scope: str | None, timeout: float,
                            page_bytes: int) -> dict[str, Any]:
    """Write the graph to `out`; returns what was written and counts of what the format cannot hold.

    Raises EchoError from the audit service (nothing is written then: the graph is gathered
    first, since the format puts every entity line, with its observations, before any relation).
    """
    graph = McpGraph()
    args: dict[str, Any] = {"max_bytes": page_bytes, "limit": MAX_EXPORT_PAGE, **({"scope": scope} if scope else {})}
    while True:
        page = ExportPage.model_validate(await call("audit", "export", args, timeout))
        for record in page.records:
            if isinstance(record, EntityRecord):
                graph.add_entity(record)
            elif isinstance(record, FactRecord):
                graph.add_fact(record)
            elif record.type in OTHER_SECTIONS:
                graph.lose(OTHER_SECTIONS[record.type])
        cursor = page.next_cursor
        if not cursor:
            break
        args["cursor"] = cursor
    lines = graph.lines()
    out.write("".join(f"{line}\n" for line in lines))
    out.flush()
    return graph.summary()
