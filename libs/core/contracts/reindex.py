"""reindex and lexical_status: rebuilding derived data (embeddings, lexical statistics)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import StrictModel

# The lexical statistics format the code computes BM25 with (migrations 0003 and 0012): 2 =
# echo_lexical() lexemes (english, plus character pairs of CJK text), document length = lexeme
# positions. Statistics with another version are stale: queries fall back to ts_rank until
# `echo-memory reindex` rebuilds them.
LEXICAL_FORMAT_VERSION = 2
# The embedding model the code ships with (libs/server/embed): what every scope's vectors should be made by.
CODE_EMBEDDING_MODEL = "all-MiniLM-L6-v2-int8"


class ReindexInput(StrictModel):
    scope: str | None = Field(None, description="the scope to rebuild; default shared")
    step: Literal["lexical", "embeddings", "graph"] = Field(
        description="what to rebuild in this request; graph: the Apache AGE mirror, when the database has AGE"
    )
    after: str | None = Field(None, description="embeddings: continue after this cursor (from the last reply)")
    limit: int = Field(500, ge=1, le=5000, description="embeddings: rows re-embedded per request")


class ReindexResult(BaseModel):
    scope: str
    step: str
    processed: int = Field(description="rows handled by this request")
    total: int = Field(description="rows the step covers in the scope")
    next: str | None = Field(None, description="cursor for the next request; null when the step is done")
    format_version: int | None = None
    skipped: str | None = Field(None, description="why the step rebuilt nothing (graph: the database has no AGE)")


class LexicalStatusInput(StrictModel):
    scope: str | None = None


class CorpusStatus(BaseModel):
    corpus: Literal["facts", "episodes"]
    documents: int
    stats_documents: int | None
    format_version: int | None
    mode: Literal["bm25", "ts_rank"]
    reason: str | None = None


class LexicalStatusResult(BaseModel):
    scope: str
    code_format_version: int
    corpora: list[CorpusStatus]
    embedding_model: str | None = Field(
        None, description="the model the scope's vectors were made by (null: none stored yet, or not recorded)"
    )
    code_embedding_model: str | None = Field(None, description="the model this deployment embeds with")
    embedding_reason: str | None = Field(
        None, description="why the scope needs `echo-memory reindex` for its vectors; null when it does not"
    )
