"""The search object the channels read, the records results travel in, and the kind and channel enums.

Pure: no store. What the channels bind must be what the statements always got, and the enums
must leave what agents see (the published schema, the JSON of a result) as it was.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import UTC, datetime

import numpy as np
import pytest

from echo_memory.libs.core.config.retrieval import RetrievalSettings
from echo_memory.libs.core.contracts.bus import Caller
from echo_memory.libs.core.contracts.common import Provenance
from echo_memory.libs.core.contracts.query import Channel, ItemKind, MemoryItem
from echo_memory.libs.server.store.access import Scope
from echo_memory.services.retrieval.fusion import CHANNEL_ORDER
from echo_memory.services.retrieval.gates import Ranked
from echo_memory.services.retrieval.request import Search

AT = datetime(2026, 12, 1, tzinfo=UTC)


def _search(vector: asyncio.Task[np.ndarray] | None = None, **changes: object) -> Search:
    search = Search(
        caller=Caller(org="acme", agent_id="a"), scopes=(Scope("s1", "shared", "shared"), Scope(None, "solo", "solo:a")),
        query="who owns billing", as_of=None, at=AT, tier="all", top_k=10, include_episodes=True,
        settings=RetrievalSettings(), model="m", vector=vector,
    )
    return dataclasses.replace(search, **changes)  # type: ignore[arg-type]


def test_a_search_cannot_be_changed_once_built() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        _search().top_k = 3  # type: ignore[misc]


def test_binds_are_the_values_every_statement_was_given() -> None:
    search = _search()
    # A solo scope nobody wrote to has no id and is not searched.
    assert search.binds() == {"scope_ids": ["s1"], "at": AT, "embedding": None, "query": "who owns billing",
                              "tier": "all"}
    assert search.binds(limit=3, grams=["billing"])["limit"] == 3
    assert search.org == "acme" and search.kinds == (ItemKind.FACT, ItemKind.EPISODE)
    assert _search(include_episodes=False).kinds == (ItemKind.FACT,)
    assert _search(top_k=80).limit == 80 and search.limit == RetrievalSettings().candidates
    assert _search(tier="hot").hot and not search.hot


async def test_vector_binds_wait_for_the_query_vector_and_add_the_candidate_limit() -> None:
    vector = np.ones(3, dtype=np.float32)

    async def embed() -> np.ndarray:
        await asyncio.sleep(0)
        return vector

    search = _search(asyncio.create_task(embed()))
    binds = await search.vector_binds(ids=["x"])
    assert binds["embedding"] is vector and binds["limit"] == search.limit and binds["ids"] == ["x"]
    with pytest.raises(ValueError, match="no vector"):
        await _search().embedding()


def test_kinds_and_channels_are_the_strings_they_replace() -> None:
    assert [k.value for k in ItemKind] == ["fact", "episode"]
    assert Channel.DENSE == "dense" and json.dumps([Channel.VIA_DIGEST]) == '["via_digest"]'
    # Settings name channels as plain strings; membership must not depend on which side is the enum.
    assert Channel.LEXICAL in RetrievalSettings().channels and Channel.GRAPH in frozenset({"graph"})
    assert set(CHANNEL_ORDER) | {Channel.ABOUT, Channel.DIGEST} == set(Channel)
    described = MemoryItem.model_fields["matched"].description or ""
    assert all(channel.value in described for channel in Channel)


def test_the_published_kind_is_still_an_inline_enum_of_two_strings() -> None:
    schema = MemoryItem.model_json_schema()
    assert schema["properties"]["kind"] == {"enum": ["fact", "episode"], "title": "Kind", "type": "string"}
    assert "ItemKind" not in schema.get("$defs", {})


def test_a_ranked_record_becomes_the_same_result_json() -> None:
    row = {"id": "f1", "text": "Billing uses Razorpay.", "flags": []}
    ranked = Ranked(row, ItemKind.FACT, (Channel.DENSE, Channel.LEXICAL), 0.5)
    assert ranked.id == "f1"
    item = MemoryItem(kind=ranked.kind, id=ranked.id, text=row["text"], score=ranked.score, rank=1,
                      matched=list(ranked.matched), tokens=5,
                      provenance=Provenance(agent_id="a", written_at=AT, scope="shared"))
    dumped = json.loads(item.model_dump_json())
    assert dumped["kind"] == "fact" and dumped["matched"] == ["dense", "lexical"]
    assert type(item.matched[0]) is str and item.kind.value == "fact"
