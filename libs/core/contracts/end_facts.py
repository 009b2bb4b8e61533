"""end_facts: end current facts without a new version (an import replaying another system's deletions).

Not an MCP tool: the CLI's `import --from` sends it over the bus as the agent that deleted the
memory. The fact stays in the store with its validity ended (`t_invalid`), so history and
`as_of` reads still see it; nothing is erased.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from echo_memory.libs.core.contracts.common import StrictModel
from echo_memory.libs.core.contracts.write import MAX_NAME_CHARS

MAX_END_FACTS = 50


class EndFactIn(StrictModel):
    source: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="the source entity's name or alias")
    target: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="the target entity's name or alias")
    relation: str = Field(min_length=1, max_length=100, description="the relation of the edge to end")
    reason: str = Field(min_length=1, max_length=500, description="why it ended, kept in the audit row")


class EndFactsInput(StrictModel):
    scope: str | None = Field(None, max_length=100, description="shared (default), solo, or a named scope")
    session_id: str = Field(min_length=1, max_length=200, description="the import run that ends them, for the audit")
    facts: list[EndFactIn] = Field(min_length=1, max_length=MAX_END_FACTS)


class EndedFact(BaseModel):
    outcome: Literal["ended", "not_current"] = Field(
        description="ended: the current version was ended now; not_current: no current fact on that edge")
    fact_id: str | None = Field(None, description="the version ended, when one was")


class EndFactsResult(BaseModel):
    results: list[EndedFact] = Field(description="one per input fact, in input order")
    scope: str
