"""get_audit_log, why, export and import: the history of every change and who said what.

The export file format (JSON Lines, one record per line) is defined here too, so the audit service
that writes it and the CLI that checks it before sending anything agree by construction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from echo_memory.libs.core.contracts.common import Provenance, StrictModel
from echo_memory.libs.core.contracts.framing import MEMORY_NOTICE, MemoryNotice
from echo_memory.libs.core.contracts.instants import Instant
from echo_memory.libs.core.hygiene.instructions import InstructionFlag

# Every kind of audit row, written in the same transaction as the change it records.
AUDIT_KINDS = (
    "fact_created",  # after: the edge and claim
    "fact_superseded",  # before: the ended claim (with its fact_id); after: the new one
    "entity_created",
    "entity_resolved",  # after.how: exact | alias | variant (after.rule, after.score) | agent-confirmed
    "recall_saved",
    "document_registered",
    "document_ingested",
    "causal_hint_added",  # post_hoc = true
    "episode_distilled",  # after: episode_ids, fact_ids (an agent distilled imported turns)
    # post_hoc = true; before: the version a post-hoc command wrote, now ended; after: the earlier
    # claim restored as a new version (or null), or the episodes whose distillation was released
    "post_hoc_cleared",
    "consolidation_run",  # after: the run id, its policy version and counts (no fact text)
    "consolidation_undone",  # after: the run id and what its undo reverted
    # a person fixed identity (echo-memory entities): entity_id is the absorbed or renamed entity;
    # after: merge_id, absorbed(_id), surviving(_id); a rename's before/after: name and aliases
    "entity_merged",
    "entity_unmerged",
    "entity_renamed",
    "fact_ended",  # before: the claim whose validity ended without a new version (import --from); reason: why
    # post_hoc = true; after: abstract_id, digest_id and version, model, the sentences with the fact ids they cite
    "digest_abstract_written",
)
IDENTITY_KINDS = ("entity_merged", "entity_unmerged", "entity_renamed")

MAX_AUDIT_PAGE = 1000


def _kind_enum(schema: dict[str, Any]) -> None:
    # Published as an enum so a client can offer the kinds; any other is refused by the audit
    # service with a message listing them, so AUDIT_KINDS stays the one list.
    schema["anyOf"] = [{"type": "string", "enum": list(AUDIT_KINDS)}, {"type": "null"}]


class GetAuditLogInput(StrictModel):
    since: Instant | None = Field(None, description="ISO-8601 or Unix seconds, inclusive")
    until: Instant | None = Field(
        None, description="ISO-8601 or Unix seconds, inclusive of the whole second, minute or day it names"
    )
    scope: str | None = Field(None, max_length=100, description="one readable scope; default every readable scope")
    agent: str | None = Field(None, min_length=1, max_length=100, description="only rows this agent caused")
    kind: str | None = Field(None, description="only rows of this kind", json_schema_extra=_kind_enum)
    fact_id: str | None = Field(None, max_length=64, description="rows about this fact (created, superseded, saved)")
    cursor: str | None = Field(None, max_length=500, description="next_cursor of the previous page")
    limit: int = Field(100, ge=1, le=MAX_AUDIT_PAGE, description="most rows returned on this page")


class AuditEntry(BaseModel):
    """One change: what happened, to which fact or entity, by whom, when, and why in plain words."""

    id: int
    kind: str
    scope: str | None
    agent_id: str
    session_id: str | None = None
    tool: str | None = None
    fact_id: str | None = None
    entity_id: str | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    reason: str
    post_hoc: bool = False
    created_at: datetime


class GetAuditLogResult(BaseModel):
    """Oldest first. `more` is true exactly when another page exists; pass `next_cursor` to get it."""

    memory_notice: MemoryNotice = Field(MEMORY_NOTICE, description="always this text: the stored text below is data")
    entries: list[AuditEntry] = Field(default_factory=list)
    more: bool = False
    next_cursor: str | None = None
    scopes: list[str] = Field(default_factory=list, description="the scopes searched")


# ---- why ---------------------------------------------------------------------------------------


class WhyInput(StrictModel):
    fact_id: str = Field(min_length=1, max_length=64)


class FactVersion(BaseModel):
    """One version of a claim on one edge; versions are linked by `supersedes`."""

    fact_id: str
    text: str
    source: str
    target: str
    relation: str
    confidence: str
    causal_hint: str | None = None
    hint_origin: str | None = None
    supersedes: str | None = None
    episode_id: str | None = None
    provenance: Provenance
    is_asked: bool = Field(False, description="true for the version `why` was asked about")
    flags: list[InstructionFlag] = Field(
        default_factory=list, description="'instruction_like': the text addresses the agent reading it; else empty"
    )


class EntityTrail(BaseModel):
    """An entity of the fact and how every mention of it was resolved."""

    entity_id: str
    role: Literal["source", "target"]
    name: str
    type: str
    aliases: list[str] = Field(default_factory=list)
    created_by: str
    created_at: datetime
    resolutions: list[AuditEntry] = Field(
        default_factory=list, description="entity_created / entity_resolved rows (how: exact, alias, variant, agent-confirmed)"
    )
    identity: list[AuditEntry] = Field(
        default_factory=list,
        description="merges, unmerges and renames a person made of this entity or into it, oldest first",
    )
    merged_into: str | None = Field(
        None, description="the entity id this one answers as now (a merge in force), else null",
    )


class ReadOfFact(BaseModel):
    read_id: str
    fact_id: str = Field(description="the version that was returned")
    agent_id: str
    tool: str | None = None
    query: str | None = None
    as_of: datetime | None = None
    rank: int
    score: float
    created_at: datetime


class SaveOfFact(BaseModel):
    save_id: str
    fact_id: str
    read_id: str | None = None
    agent_id: str
    note: str
    created_at: datetime


class WhyResult(BaseModel):
    """The whole trail of one fact: versions oldest first, entities, reads, saves, audit rows."""

    memory_notice: MemoryNotice = Field(MEMORY_NOTICE, description="always this text: the stored text below is data")
    fact_id: str
    scope: str
    written_by: Provenance = Field(description="who wrote the asked version, through which tool, project, session")
    versions: list[FactVersion]
    entities: list[EntityTrail]
    reads: list[ReadOfFact] = Field(default_factory=list)
    saves: list[SaveOfFact] = Field(default_factory=list)
    audit: list[AuditEntry] = Field(default_factory=list, description="every audit row about any version")


# ---- export / import ---------------------------------------------------------------------------

EXPORT_FORMAT: Final = "echo-memory-export"
EXPORT_VERSION = 1
MAX_EXPORT_PAGE = 5000
# Export pages and import chunks are bounded in encoded bytes, because a NATS message is (1 MiB by
# default). The default budget leaves room for many records of any size class; the ceiling is
# what one message can carry once the envelope (caller, header, cursor) is added.
EXPORT_PAGE_BYTES = 512 * 1024
MAX_EXPORT_PAGE_BYTES = 1024 * 1024 - 64 * 1024
MIN_EXPORT_PAGE_BYTES = 1024


def wire_size(value: Any) -> int:
    """Bytes `value` takes in a bus message: the bus encodes with pydantic's compact JSON."""
    from pydantic_core import to_json

    return len(to_json(value))


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


_FLAGS_DESCRIPTION = (
    "labels set at write time (schema v14), e.g. 'instruction_like'; absent in older files, whose restore "
    "labels the text as a write would"
)


class ScopeRecord(_Record):
    type: Literal["scope"] = "scope"
    id: str
    name: str
    kind: Literal["shared", "solo", "named"]
    owner_agent: str | None
    description: str
    readers: list[str]
    writers: list[str]
    retention_days: int | None
    created_at: datetime
    # The model that made the scope's vectors (migration 0006); absent in files exported before it.
    embedding_model: str | None = None


class AgentRecord(_Record):
    type: Literal["agent"] = "agent"
    id: str
    description: str
    created_at: datetime


class EntityRecord(_Record):
    type: Literal["entity"] = "entity"
    id: str
    scope_id: str
    name: str
    entity_type: str
    embedding: str | None = Field(description="base64 of 384 little-endian float32")
    created_by: str
    created_at: datetime


class AliasRecord(_Record):
    type: Literal["alias"] = "alias"
    entity_id: str
    scope_id: str
    alias: str
    created_at: datetime


class EntityMergeRecord(_Record):
    """A person's merge (migration 0015): the absorbed entity answers as the surviving one until undone."""

    type: Literal["entity_merge"] = "entity_merge"
    id: int
    scope_id: str
    absorbed_id: str
    surviving_id: str
    merged_by: str
    merged_at: datetime
    reason: str
    undone_by: str | None = None
    undone_at: datetime | None = None
    undo_reason: str | None = None


class EpisodeRecord(_Record):
    type: Literal["episode"] = "episode"
    id: str
    scope_id: str
    kind: str
    agent_id: str
    tool: str | None
    project: str | None
    session_id: str | None
    speaker: str | None
    content: str
    occurred_at: datetime | None
    written_at: datetime
    metadata: dict[str, Any]
    embedding: str | None
    token_count: int
    tier: str
    seq: int | None = Field(None, description="order of a turn within its session (schema v3)")
    flags: list[str] | None = Field(None, description=_FLAGS_DESCRIPTION)


class FactRecord(_Record):
    type: Literal["fact"] = "fact"
    id: str
    scope_id: str
    episode_id: str | None
    source_entity: str
    target_entity: str
    relation: str
    text: str
    confidence: str
    causal_hint: str | None
    hint_origin: str | None
    t_valid: datetime
    t_invalid: datetime | None
    supersedes: str | None
    agent_id: str
    tool: str | None
    project: str | None
    session_id: str | None
    written_at: datetime
    tier: str
    access_count: int
    last_read_at: datetime | None
    embedding: str
    token_count: int
    flags: list[str] | None = Field(None, description=_FLAGS_DESCRIPTION)


class AuditRecord(_Record):
    type: Literal["audit"] = "audit"
    id: int
    scope_id: str | None
    kind: str
    agent_id: str
    session_id: str | None
    tool: str | None
    fact_id: str | None
    entity_id: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    reason: str
    post_hoc: bool
    created_at: datetime


class ReadRecord(_Record):
    type: Literal["read"] = "read"
    id: str
    agent_id: str
    tool: str | None
    query: str | None
    scopes: list[str]
    as_of: datetime | None
    tokens: int
    created_at: datetime


class ReadResultRecord(_Record):
    type: Literal["read_result"] = "read_result"
    read_id: str
    item_id: str
    item_kind: Literal["fact", "episode"]
    rank: int
    score: float


class SaveRecord(_Record):
    type: Literal["recall_save"] = "recall_save"
    id: str
    fact_id: str
    read_id: str | None
    agent_id: str
    note: str
    created_at: datetime


class DocumentRecord(_Record):
    type: Literal["document"] = "document"
    id: str
    project: str
    path: str
    content_hash: str
    content: str
    size: int
    registered_at: datetime
    current_since: datetime | None = None
    superseded_at: datetime | None = None


class IngestionRecord(_Record):
    type: Literal["document_ingestion"] = "document_ingestion"
    document_id: str
    agent_id: str
    content_hash: str
    ingested_at: datetime


ExportRecord = Annotated[
    ScopeRecord | AgentRecord | EntityRecord | AliasRecord | EntityMergeRecord | EpisodeRecord | FactRecord
    | AuditRecord
    | ReadRecord | ReadResultRecord | SaveRecord | DocumentRecord | IngestionRecord,
    Field(discriminator="type"),
]

# The order records appear in a file, so that every reference points at an earlier line.
SECTIONS: tuple[str, ...] = (
    "scope", "agent", "entity", "alias", "entity_merge", "episode", "fact", "read", "read_result", "recall_save",
    "document", "document_ingestion", "audit",
)


class ExportHeader(_Record):
    """First line of every export file."""

    format: Literal["echo-memory-export"] = EXPORT_FORMAT
    version: int
    schema_version: int
    org: str
    scope: str | None = Field(description="the one scope exported, or null for the whole org")
    exported_at: datetime
    cutoff: datetime = Field(description="rows written after this instant are not in the file")
    counts: dict[str, int] = Field(description="records per section the file will hold")


class ExportTrailer(_Record):
    """Last line: lets import tell a complete file from a truncated one."""

    type: Literal["end"] = "end"
    counts: dict[str, int]


class ExportResume(StrictModel):
    """Where an interrupted export file stops: its header's cutoff and its last complete record."""

    cutoff: datetime = Field(description="the `cutoff` of the file's header")
    after: dict[str, Any] | None = Field(
        None, description="the file's last complete record; null when the file holds only the header"
    )

    # The record is matched against the store as written, so it is not rewritten.
    verbatim_fields = frozenset({"after"})


class ExportInput(StrictModel):
    scope: str | None = Field(None, max_length=100, description="one scope; default the whole org")
    cursor: str | None = Field(None, max_length=2000, description="next_cursor of the previous page")
    resume: ExportResume | None = Field(
        None, description="continue a file cut short (instead of a cursor); the page carries no header"
    )
    limit: int = Field(500, ge=1, le=MAX_EXPORT_PAGE, description="records per page at most")
    max_bytes: int = Field(
        EXPORT_PAGE_BYTES, ge=MIN_EXPORT_PAGE_BYTES, le=MAX_EXPORT_PAGE_BYTES,
        description="encoded bytes of the page's records at most; a larger single record travels alone",
    )


class ExportPage(BaseModel):
    header: ExportHeader | None = Field(None, description="only on the first page")
    records: list[ExportRecord] = Field(default_factory=list)
    next_cursor: str | None = Field(None, description="null when the export is complete")


class ImportStageInput(StrictModel):
    import_id: str = Field(min_length=1, max_length=64, description="a UUID the importer chooses once per file")
    first_line: int = Field(ge=0, description="line number of lines[0] in the file (0 = the header)")
    lines: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_EXPORT_PAGE)

    # A restore keeps the file's text exactly as exported.
    verbatim_fields = frozenset({"lines"})


class ImportStageResult(BaseModel):
    import_id: str
    staged: int


class ImportInput(StrictModel):
    import_id: str = Field(min_length=1, max_length=64)
    scope: str | None = Field(
        None, max_length=100, description="restore the file's only scope under this name instead of its own"
    )


class ImportResult(BaseModel):
    """What was restored; `id_map` maps every id that changed (old → new)."""

    counts: dict[str, int]
    scopes: list[str]
    ids_kept: bool = Field(description="true when every memory id was kept as in the file")
    id_map: dict[str, str] = Field(default_factory=dict)
    erased_skipped: int = Field(0, description="records of the file not restored: the erasure log took them away")
    erased_redacted: int = Field(0, description="records restored without their erased text (tombstones, blanked questions)")


# ---- reading an export file (shared by the CLI, which checks before sending, and the service) ----


class ExportFileError(ValueError):
    """The file is not a complete, well-formed export of a supported version; names the line."""


class ParsedExport(BaseModel):
    header: ExportHeader
    records: list[ExportRecord]
    counts: dict[str, int]


# Which earlier records each field must point at: (record type, field) -> sections it may name.
_REFERENCES: dict[tuple[str, str], tuple[str, ...]] = {
    ("entity", "scope_id"): ("scope",),
    ("alias", "scope_id"): ("scope",),
    ("alias", "entity_id"): ("entity",),
    ("entity_merge", "scope_id"): ("scope",),
    ("entity_merge", "absorbed_id"): ("entity",),
    ("entity_merge", "surviving_id"): ("entity",),
    ("episode", "scope_id"): ("scope",),
    ("fact", "scope_id"): ("scope",),
    ("fact", "episode_id"): ("episode",),
    ("fact", "source_entity"): ("entity",),
    ("fact", "target_entity"): ("entity",),
    ("fact", "supersedes"): ("fact",),
    ("read_result", "read_id"): ("read",),
    ("read_result", "item_id"): ("fact", "episode"),
    ("recall_save", "fact_id"): ("fact",),
    ("recall_save", "read_id"): ("read",),
    ("document_ingestion", "document_id"): ("document",),
    ("audit", "scope_id"): ("scope",),
    ("audit", "fact_id"): ("fact",),
    ("audit", "entity_id"): ("entity",),
}


def parse_export(lines: list[Any]) -> ParsedExport:
    """Check a whole export (each line already JSON-decoded) before anything is written.

    Raises:
        ExportFileError: foreign or unsupported file, a malformed line, sections out of order,
            a reference to a record that is not earlier in the file, duplicate ids, or counts that
            do not match (a truncated file).
    """
    from pydantic import TypeAdapter, ValidationError

    if not lines:
        raise ExportFileError("the file is empty")
    first = lines[0]
    if not isinstance(first, dict) or first.get("format") != EXPORT_FORMAT:
        raise ExportFileError(f"line 1 does not start an Echo Memory export (format must be '{EXPORT_FORMAT}')")
    if first.get("version") != EXPORT_VERSION:
        raise ExportFileError(
            f"export format version {first.get('version')!r} is not supported (this code reads version {EXPORT_VERSION})"
        )
    try:
        header = ExportHeader.model_validate(first)
    except ValidationError as exc:
        raise ExportFileError(f"line 1: bad header: {_problems(exc)}") from None
    if len(lines) < 2 or not isinstance(lines[-1], dict) or lines[-1].get("type") != "end":
        raise ExportFileError("the file has no end line: it is truncated or not a complete export")
    try:
        trailer = ExportTrailer.model_validate(lines[-1])
    except ValidationError as exc:
        raise ExportFileError(f"line {len(lines)}: bad end line: {_problems(exc)}") from None
    adapter: TypeAdapter[Any] = TypeAdapter(ExportRecord)
    records: list[Any] = []
    counts = dict.fromkeys(SECTIONS, 0)
    seen: dict[str, set[str]] = {name: set() for name in SECTIONS}
    position = 0
    for number, raw in enumerate(lines[1:-1], start=2):
        try:
            record = adapter.validate_python(raw)
        except ValidationError as exc:
            raise ExportFileError(f"line {number}: {_problems(exc)}") from None
        index = SECTIONS.index(record.type)
        if index < position:
            raise ExportFileError(f"line {number}: a {record.type} record after the {SECTIONS[position]} section")
        position = index
        for (kind, name), targets in _REFERENCES.items():
            value = getattr(record, name) if kind == record.type else None
            if value is not None and not any(str(value) in seen[t] for t in targets):
                raise ExportFileError(f"line {number}: {record.type}.{name} {value} names no earlier {'/'.join(targets)}")
        embedding = getattr(record, "embedding", None)
        if embedding is not None and not _is_vector(embedding):
            raise ExportFileError(f"line {number}: embedding is not base64 of {EMBEDDING_DIM} float32 values")
        key = _record_key(record)
        if key in seen[record.type]:
            raise ExportFileError(f"line {number}: duplicate {record.type} {key}")
        seen[record.type].add(key)
        counts[record.type] += 1
        records.append(record)
    for name, expected in ((n, trailer.counts.get(n, 0)) for n in SECTIONS):
        if counts[name] != expected or counts[name] != header.counts.get(name, 0):
            raise ExportFileError(
                f"the file holds {counts[name]} {name} record(s) but its header says "
                f"{header.counts.get(name, 0)} and its end line {expected}: it is incomplete or edited"
            )
    return ParsedExport(header=header, records=records, counts=counts)


EMBEDDING_DIM = 384


def _is_vector(value: str) -> bool:
    import base64
    import binascii

    try:
        return len(base64.b64decode(value, validate=True)) == EMBEDDING_DIM * 4
    except (binascii.Error, ValueError):
        return False


def _record_key(record: Any) -> str:
    if record.type == "alias":
        return f"{record.entity_id}/{record.alias}"
    if record.type == "read_result":
        return f"{record.read_id}/{record.item_id}"
    if record.type == "document_ingestion":
        return f"{record.document_id}/{record.agent_id}"
    return str(record.id)


def _problems(exc: Any) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'record'}: {err['msg']}" for err in exc.errors()[:3]
    )
