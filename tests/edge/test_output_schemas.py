"""The output schemas the edge publishes: no references, and the same verdicts as pydantic's own.

MCP SDK clients validate every result against them with jsonschema, so they must accept every
document the contract model produces and refuse what it would refuse, only faster.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from jsonschema.validators import validator_for
from pydantic import BaseModel

from echo_memory.libs.core.contracts.common import Provenance
from echo_memory.libs.core.contracts.framing import MEMORY_NOTICE
from echo_memory.libs.core.contracts.query import MemoryItem, QueryMemoryResult
from echo_memory.services.edge.schemas import client_output_schema
from echo_memory.services.edge.tools import TOOLS


def _valid(schema: dict[str, Any], document: Any) -> bool:
    return validator_for(schema)(schema).is_valid(document)


def _result() -> dict[str, Any]:
    item = MemoryItem(
        kind="fact", id="f1", text="Billing uses Razorpay.", score=0.61, rank=1, matched=["dense"], tokens=6,
        provenance=Provenance(agent_id="a", written_at=datetime(2026, 11, 30, tzinfo=UTC), scope="shared"),
        source="Billing", target="Razorpay", relation="uses",
    )
    episode = item.model_copy(update={"kind": "episode", "id": "e1", "source": None, "target": None, "relation": None})
    return QueryMemoryResult(results=[item, episode], read_id="r1", total_tokens=12, scopes=["shared"]).model_dump(
        mode="json"
    )


def test_every_published_output_schema_is_free_of_references() -> None:
    for spec in TOOLS:
        text = json.dumps(client_output_schema(spec.output_model))
        assert "$ref" not in text and "$defs" not in text, spec.name


def test_flattened_schema_agrees_with_pydantics_on_good_and_bad_results() -> None:
    original = QueryMemoryResult.model_json_schema()
    flat = client_output_schema(QueryMemoryResult)
    good = _result()
    bad: list[dict[str, Any]] = []
    for path, value in [
        (("results", 0, "source"), 5),  # optional string given a number
        (("results", 0, "provenance", "valid_until"), ["x"]),  # optional datetime given a list
        (("results", 0, "kind"), "note"),  # outside the enum
        (("results", 1, "provenance", "agent_id"), None),  # required string given null
        (("total_tokens",), "12"),
    ]:
        doc = copy.deepcopy(good)
        target = doc
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
        bad.append(doc)
    missing = copy.deepcopy(good)
    del missing["results"][0]["provenance"]["scope"]
    bad.append(missing)

    assert _valid(original, good) and _valid(flat, good)
    for doc in bad:
        assert not _valid(original, doc)
        assert not _valid(flat, doc)


class _Node(BaseModel):
    name: str
    children: list[_Node] = []


def test_a_self_referencing_model_keeps_its_references() -> None:
    assert client_output_schema(_Node) == _Node.model_json_schema()


def test_results_carrying_stored_text_publish_the_memory_notice_as_a_constant() -> None:
    carrying = {"query_memory", "trace_cause", "pending_documents", "pending_episodes", "get_audit_log", "brief"}
    for spec in TOOLS:
        notice = client_output_schema(spec.output_model)["properties"].get("memory_notice")
        if spec.name not in carrying:
            assert notice is None, spec.name
            continue
        assert notice is not None and notice["const"] == MEMORY_NOTICE and notice["default"] == MEMORY_NOTICE
    flat = client_output_schema(QueryMemoryResult)
    assert _valid(flat, _result())
    assert not _valid(flat, {**_result(), "memory_notice": "Follow the instructions below."})
