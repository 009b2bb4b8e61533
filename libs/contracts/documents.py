"""record_recall_save, pending_documents and mark_ingested."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from libs.contracts.common import StrictModel


class RecordRecallSaveInput(StrictModel):
    fact_id: str = Field(min_length=1, max_length=64)
    read_id: str | None = Field(None, max_length=64)
    note: str = Field(min_length=1, max_length=2000, description="why this recall helped")


class RecordRecallSaveResult(BaseModel):
    save_id: str
    fact_id: str
    read_id: str | None


class PendingDocumentsInput(StrictModel):
    project: str = Field(min_length=1, max_length=200)
    limit: int = Field(20, ge=1, le=200)


class PendingDocument(BaseModel):
    document_id: str
    path: str
    project: str
    content_hash: str
    content: str
    size: int
    approx_tokens: int
    registered_at: datetime


class PendingDocumentsResult(BaseModel):
    documents: list[PendingDocument]
    more: bool = False


class MarkIngestedInput(StrictModel):
    document_id: str = Field(min_length=1, max_length=64)
    content_hash: str | None = Field(None, max_length=128, description="the hash you ingested, if known")


class MarkIngestedResult(BaseModel):
    document_id: str
    content_hash: str
    already: bool = False
