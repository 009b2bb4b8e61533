"""Consolidation: tier runs over a scope, their log and undo, and the session brief."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import StrictModel
from echo_memory.libs.core.contracts.framing import MEMORY_NOTICE, MemoryNotice

Tier = Literal["hot", "consolidated", "archived"]


class ConsolidateInput(StrictModel):
    scope: str | None = Field(None, min_length=1, max_length=100, description="one scope; every scope when omitted")
    dry_run: bool = Field(False, description="compute what would move and be built, change nothing")


class TierCounts(BaseModel):
    """Facts per outcome of one run in one scope."""

    placed: int = Field(0, description="facts that had never been placed by a run and got their first tier")
    promoted: int = Field(0, description="facts moved to a hotter tier")
    demoted: int = Field(0, description="facts moved to a colder tier")
    unchanged: int = Field(0, description="facts already in the tier the policy gives them")
    hot: int = Field(0, description="facts hot after the run")
    consolidated: int = Field(0, description="facts consolidated after the run")
    archived: int = Field(0, description="facts archived after the run")
    digests_built: int = Field(0, description="digest versions started (new or changed member sets)")
    digests_ended: int = Field(0, description="digest versions ended because their subject no longer qualifies")
    digests_unchanged: int = Field(0, description="digests whose member set did not change")
    failed: int = Field(0, description="steps that failed (the run is then rolled back whole)")
    skipped: int = Field(0, description="facts or digests a run left alone, e.g. changed by another run meanwhile")


class Prewarm(BaseModel):
    """What a run read back into the database's buffer cache once it had committed."""

    pages: int = Field(0, description="pages read into the buffer cache")
    relations: list[str] = Field(default_factory=list, description="the relations read, whole")
    skipped: list[str] = Field(default_factory=list,
                               description="relations left out: with them the pages would not fit in the cache")
    unavailable: str | None = Field(None, description="why nothing was read: the database has no pg_prewarm, "
                                     "or reading failed (the run itself has committed)")


class ScopeRun(BaseModel):
    run_id: str | None = Field(description="the run's id; null for a dry run, which records nothing")
    scope: str
    policy_version: int
    counts: TierCounts
    moves_sample: list[TierMove] = Field(default_factory=list, description="up to 20 of the run's tier moves")
    prewarm: Prewarm | None = Field(None, description="the hot search's pages read back into the buffer cache after "
                                    "the run; null for a dry run and for a run in the services' own process")


class TierMove(BaseModel):
    fact_id: str
    from_tier: Tier
    to_tier: Tier
    reason: str


class ConsolidateResult(BaseModel):
    dry_run: bool
    runs: list[ScopeRun]


class ConsolidateLogInput(StrictModel):
    scope: str | None = Field(None, min_length=1, max_length=100, description="only this scope's runs")
    limit: int = Field(20, ge=1, le=500, description="the newest runs, at most this many")


class RunInfo(BaseModel):
    run_id: str
    scope: str
    actor: str
    policy_version: int
    started_at: datetime
    finished_at: datetime | None
    undone_at: datetime | None
    counts: TierCounts


class ConsolidateLogResult(BaseModel):
    runs: list[RunInfo]


class ConsolidateUndoInput(StrictModel):
    run_id: str = Field(min_length=1, max_length=64, description="a run id from `consolidate log`")


class ConsolidateUndoResult(BaseModel):
    run_id: str
    reverted: int = Field(description="facts put back in the tier they had before the run")
    skipped: int = Field(description="facts a later run has moved again: left where that run put them")
    digests_reverted: int = Field(description="digest versions the run started that were ended again")
    digests_reopened: int = Field(description="digest versions the run had ended that are current again")


class BriefInput(StrictModel):
    project: str | None = Field(None, min_length=1, max_length=200,
                                description="favour what was written in this project (a name, as facts record it)")
    scope: str | list[str] | None = Field(None, description="scopes to brief from (default: every scope you may read)")
    max_tokens: int = Field(600, ge=50, le=8000, description="budget for the brief's text")


class BriefItem(BaseModel):
    digest_id: str
    kind: Literal["entity", "topic", "area"]
    entity: str | None = Field(description="the entity an entity digest describes; null for a topic or an area")
    scope: str
    summary: str
    abstract: str | None = Field(None, description="the digest's abstract, written by the user's own model "
                                 "(`echo-memory consolidate abstract`) and stored only after every sentence was "
                                 "checked against the facts it cites; null when it has none")
    abstract_model: str | None = Field(None, description="the model that wrote the abstract")
    facts: int = Field(description="current facts the digest summarises")
    tokens: int = Field(description="tokens of the summary and the abstract")
    last_seen: datetime


class BriefResult(BaseModel):
    memory_notice: MemoryNotice = Field(MEMORY_NOTICE, description="always this text: the stored text below is data")
    items: list[BriefItem]
    text: str = Field(description="the items framed as recalled data, ready to paste into a model's context")
    tokens: int = Field(description="tokens of the items' summaries and abstracts (within max_tokens)")
    digests_available: int = Field(description="current digests in the scopes read; more than items when the budget cut")
    note: str | None = Field(None, description="why the brief is empty, when it is")


# ---- abstracts written by the user's own model (echo-memory consolidate abstract) ----------------

MAX_ABSTRACT_SENTENCES = 8
MAX_SENTENCE_CHARS = 500
MAX_ABSTRACT_CHARS = 2000  # all sentences together
MAX_CITES = 20  # fact ids one sentence may cite
MAX_MEMBERS_SENT = 40  # member facts listed per digest for the model, newest first
MAX_CANDIDATES_PAGE = 100
MAX_MODEL_NAME = 200

# Why a sentence (or, as sentence 0, the whole abstract) keeps an abstract from being stored.
AbstractProblemReason = Literal[
    "no_citation",  # the sentence cites no fact
    "not_a_member",  # it cites a fact that is not a member of the digest's current version
    "fact_not_current",  # it cites a member that a later version has replaced since
    "unsupported_number",  # a number in it occurs in none of the facts it cites
    "unsupported_date",  # a date (ISO, month, weekday, relative day) occurs in none of them
    "unsupported_name",  # a proper name or identifier occurs in none of them
    "secret",  # the secret detector finds a credential in it
    "instruction_like",  # it addresses the reader as an instruction (libs/core/hygiene/instructions.py)
    "too_long",  # the abstract is longer than MAX_ABSTRACT_CHARS
]


class AbstractCandidatesInput(StrictModel):
    scope: str | None = Field(None, min_length=1, max_length=100,
                              description="one scope; default every scope the caller may write")
    cursor: str | None = Field(None, max_length=100, description="next_cursor of the previous page")
    limit: int = Field(20, ge=1, le=MAX_CANDIDATES_PAGE, description="digests on this page, at most")


class MemberFact(BaseModel):
    fact_id: str
    text: str = Field(description="the fact's own sentence")


class AbstractCandidate(BaseModel):
    digest_id: str = Field(description="the current version's id; an abstract belongs to this version only")
    version: int
    kind: Literal["entity", "topic", "area"]
    entity: str | None = Field(description="the entity an entity digest describes; null for a topic or an area")
    scope: str
    members: list[MemberFact] = Field(description=f"current member facts, newest first, at most {MAX_MEMBERS_SENT}")
    members_total: int = Field(description="current member facts in all (more than `members` when cut)")


class AbstractCandidatesResult(BaseModel):
    """Current digests without an abstract in scopes the caller may write; empty when none is left."""

    memory_notice: MemoryNotice = Field(MEMORY_NOTICE, description="always this text: the stored text below is data")
    digests: list[AbstractCandidate]
    next_cursor: str | None = Field(None, description="pass as cursor for the next page; null on the last page")


class AbstractSentence(StrictModel):
    text: str = Field(min_length=1, max_length=MAX_SENTENCE_CHARS)
    cites: list[str] = Field(max_length=MAX_CITES, description="ids of the member facts the sentence relies on")


class WriteAbstractInput(StrictModel):
    digest_id: str = Field(min_length=1, max_length=64, description="a digest_id from abstract_candidates")
    sentences: list[AbstractSentence] = Field(min_length=1, max_length=MAX_ABSTRACT_SENTENCES)
    model: str = Field(min_length=1, max_length=MAX_MODEL_NAME, description="the model that wrote it, as configured")
    session_id: str | None = Field(None, max_length=200, description="the run that wrote it, for provenance")
    dry_run: bool = Field(False, description="check only: answer the verdict, store nothing")


class AbstractProblem(BaseModel):
    sentence: int = Field(description="1-based sentence number; 0 for the abstract as a whole")
    reason: AbstractProblemReason
    detail: str = Field(description="one line for a person: what was not found where")


class WriteAbstractResult(BaseModel):
    """The server's verdict: stored only when accepted and not a dry run (a refused write is an error)."""

    dry_run: bool
    accepted: bool = Field(description="true when every check passed")
    stored: bool
    abstract_id: str | None = Field(None, description="the stored abstract's id; null unless stored")
    digest_id: str
    scope: str
    problems: list[AbstractProblem] = Field(default_factory=list, description="every check that failed (dry run)")


class DigestAbstractsInput(StrictModel):
    scope: str | list[str] | None = Field(None, description="scopes to list from (default: every scope you may read)")
    limit: int = Field(50, ge=1, le=500, description="newest abstracts first, at most this many")


class CitedSentence(BaseModel):
    text: str
    cites: list[str] = Field(description="ids of the member facts it cites")


class DigestAbstract(BaseModel):
    abstract_id: str
    origin: Literal["model"] = Field("model", description="always model: written by the user's own model, "
                                     "checked against the facts it cites, never by an agent")
    digest_id: str
    kind: Literal["entity", "topic", "area"]
    entity: str | None
    scope: str
    sentences: list[CitedSentence]
    text: str
    model: str
    written_by: str
    written_at: datetime


class DigestAbstractsResult(BaseModel):
    """Abstracts of current digest versions, newest first; empty (with a note) when there are none."""

    memory_notice: MemoryNotice = Field(MEMORY_NOTICE, description="always this text: the stored text below is data")
    items: list[DigestAbstract]
    text: str = Field(description="the abstracts framed as recalled data, each marked as model-written")
    note: str | None = Field(None, description="why the list is empty, when it is")


ScopeRun.model_rebuild()
