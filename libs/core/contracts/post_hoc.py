"""unhinted_facts, add_causal_hints, clear_post_hoc: the writes verbs behind the opt-in model commands.

`echo-memory infer-causal-hints` lists current facts that have no causal hint (unhinted_facts),
asks the user's own model about the ones whose sentence states a cause, and records the hints the
model backed with a verbatim quote (add_causal_hints). `--clear --write` of it and of
`echo-memory distil` ends exactly what that command wrote (clear_post_hoc). All three are the
admin identity's only: the CLI on the host sends them, no MCP tool does.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import CausalHint, StrictModel
from echo_memory.libs.core.contracts.framing import MEMORY_NOTICE, MemoryNotice
from echo_memory.libs.core.contracts.identity import POST_HOC_AGENTS

MAX_UNHINTED_PAGE = 200
MAX_HINTS = 50
MIN_QUOTE_CHARS = 3
HINTS_TOOL = "echo-memory infer-causal-hints"  # the tool recorded on every hint version

PostHocAgent = Literal["echo-distil", "echo-causal-hints"]
assert frozenset(get_args(PostHocAgent)) == POST_HOC_AGENTS  # one list of post-hoc identities


class UnhintedFactsInput(StrictModel):
    cursor: str | None = Field(None, max_length=200, description="next_cursor of the previous page")
    limit: int = Field(100, ge=1, le=MAX_UNHINTED_PAGE)


class UnhintedFact(BaseModel):
    fact_id: str
    scope: str
    source: str = Field(description="the source entity's name")
    target: str = Field(description="the target entity's name")
    relation: str
    text: str = Field(description="the fact's own sentence")


class UnhintedFactsResult(BaseModel):
    """Current facts without a causal hint in the shared and named scopes, oldest first; empty when none."""

    memory_notice: MemoryNotice = Field(MEMORY_NOTICE, description="always this text: the stored text below is data")
    facts: list[UnhintedFact]
    next_cursor: str | None = Field(None, description="pass as cursor for the next page; null on the last page")


class HintIn(StrictModel):
    fact_id: str = Field(min_length=1, max_length=64, description="a fact unhinted_facts listed")
    causal_hint: CausalHint
    quote: str = Field(min_length=MIN_QUOTE_CHARS, max_length=2000,
                       description="the words of the fact's own sentence that state the cause, verbatim")


class AddCausalHintsInput(StrictModel):
    hints: list[HintIn] = Field(min_length=1, max_length=MAX_HINTS)
    session_id: str = Field(min_length=1, max_length=200, description="the run that inferred them, for provenance")


class HintAdded(BaseModel):
    fact_id: str = Field(description="the version that had no hint; it is ended")
    new_fact_id: str = Field(description="the same claim with the hint, now current")
    causal_hint: CausalHint


class HintSkipped(BaseModel):
    fact_id: str
    reason: str = Field(description="why nothing was written for it, e.g. the fact is no longer current")


class AddCausalHintsResult(BaseModel):
    added: list[HintAdded] = Field(default_factory=list)
    skipped: list[HintSkipped] = Field(default_factory=list)


class ClearPostHocInput(StrictModel):
    agent: PostHocAgent = Field(description="whose writes to clear: the distil command's or the hints command's")
    apply: bool = Field(False, description="false: only report what would be cleared")


class ClearedFact(BaseModel):
    fact_id: str = Field(description="the current version the command wrote; ended by the clear")
    scope: str
    text: str
    restored_from: str | None = Field(
        None, description="the earlier version (not written by the command) whose claim becomes current again")
    restored_fact_id: str | None = Field(None, description="the new version carrying that claim (null in a dry run)")


class ClearPostHocResult(BaseModel):
    """What the clear ended (or would end); empty lists when the command's writes are no longer current."""

    memory_notice: MemoryNotice = Field(MEMORY_NOTICE, description="always this text: the stored text below is data")
    applied: bool
    facts: list[ClearedFact] = Field(default_factory=list)
    released_episodes: list[str] = Field(
        default_factory=list, description="imported turns the command had marked distilled; pending again")
