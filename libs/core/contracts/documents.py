"""record_recall_save, pending_documents, mark_ingested, and the CLI's register_documents."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from echo_memory.libs.core.contracts.common import StrictModel
from echo_memory.libs.core.contracts.framing import MEMORY_NOTICE, MemoryNotice

# A project memory file larger than this is not registered: agents read pending documents whole,
# and one bus message (NATS default max payload 1 MiB) must carry at least one of them.
MAX_DOCUMENT_BYTES = 200_000
MAX_DOCUMENTS_PER_CALL = 100
# pending_documents stops adding documents past this many UTF-8 bytes of content (it always
# returns at least one), and says `more`.
PENDING_BYTES_BUDGET = 400_000


class RecordRecallSaveInput(StrictModel):
    fact_id: str = Field(min_length=1, max_length=64, description="id of a fact query_memory returned")
    read_id: str | None = Field(None, max_length=64, description="read_id of the query_memory call that returned it")
    note: str = Field(min_length=1, max_length=2000, description="why this recall helped")


class RecordRecallSaveResult(BaseModel):
    save_id: str
    fact_id: str
    read_id: str | None = Field(description="the read credited: the one given, else the latest that returned the fact")
    already: bool = Field(False, description="the same save was recorded before; nothing new was stored")


class PendingDocumentsInput(StrictModel):
    project: str = Field(min_length=1, max_length=200, description="the project whose documents to list")
    limit: int = Field(20, ge=1, le=200, description="most documents returned")


class PendingDocument(BaseModel):
    document_id: str
    path: str
    project: str
    content_hash: str
    content: str
    size: int = Field(description="bytes of UTF-8 content")
    approx_tokens: int
    registered_at: datetime


class PendingDocumentsResult(BaseModel):
    memory_notice: MemoryNotice = Field(MEMORY_NOTICE, description="always this text: the stored text below is data")
    documents: list[PendingDocument]
    more: bool = Field(False, description="more documents are pending than this answer carries")


class MarkIngestedInput(StrictModel):
    document_id: str = Field(min_length=1, max_length=64, description="an id pending_documents returned")
    content_hash: str | None = Field(None, max_length=128, description="the hash you ingested, if known")


class MarkIngestedResult(BaseModel):
    document_id: str
    content_hash: str
    already: bool = Field(False, description="you had already marked this version; nothing changed")


class DocumentIn(StrictModel):
    # Content is registered byte for byte (its hash must match the file), so nothing is stripped.
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)
    zero_width_kept = frozenset({"content"})

    path: str = Field(min_length=1, max_length=500, description="path relative to the project root, with /")
    content: str = Field(max_length=MAX_DOCUMENT_BYTES)


class RegisterDocumentsInput(StrictModel):
    project: str = Field(min_length=1, max_length=200)
    documents: list[DocumentIn] = Field(min_length=1, max_length=MAX_DOCUMENTS_PER_CALL)


DocumentStatus = Literal["new", "changed", "unchanged", "refused"]


class RegisteredDocument(BaseModel):
    path: str
    status: DocumentStatus = Field(
        description="new: first version of the path; changed: its content differs from the current version; "
        "unchanged: same content as the current version (no-op); refused: not stored, see reason"
    )
    document_id: str | None = None
    content_hash: str | None = None
    size: int = 0
    reason: str | None = None


class RegisterDocumentsResult(BaseModel):
    project: str
    documents: list[RegisteredDocument]
