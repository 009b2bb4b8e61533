"""Text hygiene on every string argument of every verb's input model (every model VERBS reaches).

Each text field gets each refused character (it must be refused naming that field) and a
zero-width character (it must be removed, leaving the value as it was without it).
"""

from __future__ import annotations

import copy
from typing import Any, get_args

import pytest
from pydantic import BaseModel, ValidationError

from echo_memory.libs.core.contracts.common import StrictModel
from echo_memory.libs.core.contracts.errors import InvalidArgument
from echo_memory.libs.core.contracts.parsing import parse_args
from echo_memory.libs.core.contracts.verbs import VERBS
from echo_memory.libs.core.contracts.write import WriteEpisodeInput

REFUSED = {
    "NUL": "\x00", "ESC": "\x1b", "DEL": "\x7f", "C1 NEL": "\x85", "RLO": "\u202e", "LRE": "\u202a",
    "PDF": "\u202c", "RLI": "\u2067", "PDI": "\u2069", "lone surrogate": "\ud800",
}
ZERO_WIDTH = {"ZWSP": "\u200b", "ZWNJ": "\u200c", "ZWJ": "\u200d", "WJ": "\u2060", "BOM": "\ufeff"}

# A valid payload per input model, setting every field that takes text.
VALID: dict[str, dict[str, Any]] = {
    "WriteEpisodeInput": {"scope": "shared", "session_id": "s-1", "project": "billing", "idempotency_key": "k-1",
                          "source_episode_ids": ["ep-1"]},
    "EntityIn": {"name": "Stripe", "type": "vendor", "aliases": ["stripe-api"]},
    "FactIn": {"source": "Payments", "target": "Stripe", "relation": "uses", "fact": "Payments uses Stripe.",
               "confidence": "extracted"},
    "EntityResolution": {"mention": "Stripe", "entity_id": "new", "rationale": "same vendor"},
    "RecordRecallSaveInput": {"fact_id": "f-1", "read_id": "r-1", "note": "it helped"},
    "PendingDocumentsInput": {"project": "billing"},
    "MarkIngestedInput": {"document_id": "d-1", "content_hash": "sha256:ab"},
    "RegisterDocumentsInput": {"project": "billing", "documents": [{"path": "CLAUDE.md", "content": "hi"}]},
    "DocumentIn": {"path": "docs/CLAUDE.md", "content": "# Notes\n\tindented\r\n"},
    "TokenCreateInput": {"agent_id": "agent-1", "read_scopes": ["shared"], "write_scopes": ["shared"]},
    "TokenVerifyInput": {"token_hash": "0" * 64},
    "NoArgs": {},
    "TokenRevokeInput": {"token_id": "t-1", "agent_id": "agent-1"},
    "ScopeCreateInput": {"name": "ops", "description": "operations"},
    "ScopeNameInput": {"name": "ops"},
    "TokenGrantInput": {"token_id": "t-1", "read_scopes": ["ops"], "write_scopes": ["ops"]},
    "ImportEpisodesInput": {"scope": "shared", "episodes": [{"content": "Alice: hi"}]},
    "EpisodeIn": {"content": "Alice: hi", "speaker": "Alice", "session_id": "s-1", "project": "billing",
                  "metadata": {"source": "chat"}, "source": "chat", "external_id": "x-1"},
    "PendingEpisodesInput": {"scope": "shared", "project": "billing", "source": "codex", "cursor": "c-1"},
    "MarkDistilledInput": {"episode_ids": ["ep-1"], "fact_ids": ["f-1"], "note": "nothing else"},
    "CalibrateInput": {},
    "QueryMemoryInput": {"query": "which vendor", "scope": "shared", "about": ["Stripe"], "as_of": "2026-01-01T00:00:00Z"},
    "TraceCauseInput": {"topic": "outage", "scope": ["shared", "ops"], "as_of": "2026-01-01T00:00:00Z"},
    "GetAuditLogInput": {"since": "2026-01-01", "until": "2026-02-01", "scope": "shared", "agent": "agent-1",
                         "kind": "fact_created", "fact_id": "f-1", "cursor": "c-1"},
    "WhyInput": {"fact_id": "f-1"},
    "ExportInput": {"scope": "shared", "cursor": "c-1"},
    "ExportResume": {"cutoff": "2026-01-01T00:00:00Z", "after": {"type": "fact", "text": "x"}},
    "ImportStageInput": {"import_id": "i-1", "first_line": 0, "lines": [{"format": "echo-memory-export"}]},
    "ImportInput": {"import_id": "i-1", "scope": "restored"},
    "ReindexInput": {"scope": "shared", "step": "embeddings", "after": "c-1"},
    "LexicalStatusInput": {"scope": "shared"},
    "HealthInput": {"scope": "shared"},
    "GraphInput": {"scope": ["shared"], "agent": "agent-1", "project": "billing", "since": "2026-01-01",
                   "until": "2026-02-01", "as_of": "2026-01-15T00:00:00Z", "cluster": "c-1"},
    "EntityFactsInput": {"entity_id": "e-1", "scope": ["shared"], "agent": "agent-1", "project": "billing",
                         "since": "2026-01-01", "until": "2026-02-01", "as_of": "2026-01-15T00:00:00Z"},
    "RecallCostInput": {"scope": ["shared"], "agent": "agent-1", "since": "2026-01-01", "until": "2026-02-01"},
    "UnhintedFactsInput": {"cursor": "c-1"},
    "AddCausalHintsInput": {"session_id": "s-1", "hints": [{"fact_id": "f-1", "causal_hint": "caused_by",
                                                           "quote": "because of it"}]},
    "HintIn": {"fact_id": "f-1", "causal_hint": "caused_by", "quote": "because of it"},
    "ClearPostHocInput": {"agent": "echo-distil"},
    "ConsolidateInput": {"scope": "shared"},
    "ConsolidateLogInput": {"scope": "shared"},
    "ConsolidateUndoInput": {"run_id": "r-1"},
    "BriefInput": {"project": "billing", "scope": "shared"},
    "AbstractCandidatesInput": {"scope": "shared", "cursor": "c-1"},
    "WriteAbstractInput": {"digest_id": "d-1", "model": "gpt", "session_id": "s-1",
                           "sentences": [{"text": "Billing uses Stripe.", "cites": ["f-1"]}]},
    "AbstractSentence": {"text": "Billing uses Stripe.", "cites": ["f-1"]},
    "DigestAbstractsInput": {"scope": "shared"},
    "EndFactsInput": {"scope": "shared", "session_id": "s-1",
                      "facts": [{"source": "Payments", "target": "Stripe", "relation": "uses", "reason": "deleted"}]},
    "EndFactIn": {"source": "Payments", "target": "Stripe", "relation": "uses", "reason": "deleted"},
    "ForgetInput": {"fact_id": "f-1", "entity": "Dana Whitlock", "in_scope": "shared", "scope": "ops", "search": "Dana",
                    "reason": "deletion request", "ref": "DSR-1", "by": "dpo"},
    "ForgetFinishInput": {"erasure_id": "e-1"},
    "ForgetLogInput": {},
    "EntityDeferredInput": {"scope": "shared"},
    "EntityMergeInput": {"keep": "Stripe", "absorb": "Stripe API", "scope": "shared", "reason": "one vendor"},
    "EntityUnmergeInput": {"entity": "Stripe", "alias": "Stripe API", "scope": "shared", "reason": "two things"},
    "EntityRenameInput": {"entity": "Stripe", "new_name": "Stripe Inc", "scope": "shared", "reason": "legal name"},
}


def _input_models() -> list[type[StrictModel]]:
    found: list[type[StrictModel]] = []

    def visit(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, StrictModel) and annotation not in found:
            found.append(annotation)
            for field in annotation.model_fields.values():
                visit(field.annotation)
        for arg in get_args(annotation):
            visit(arg)

    for v in VERBS:
        visit(v.input)
    return found


MODELS = _input_models()


def _takes_text(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return False  # a nested model is tested as a model of its own
    return annotation is str or any(_takes_text(arg) for arg in get_args(annotation))


def _text_fields(model: type[StrictModel]) -> list[str]:
    return [name for name, field in model.model_fields.items() if _takes_text(field.annotation)]


def _with(value: Any, char: str) -> Any:
    """`value` with `char` inside its (first) string."""
    if isinstance(value, str):
        return value[:1] + char + value[1:]
    if isinstance(value, list):
        return [_with(value[0], char), *value[1:]]
    key = next(iter(value))
    return {**value, key: _with(value[key], char)}


CASES = [(m, f) for m in MODELS for f in _text_fields(m)]


def test_every_input_model_has_a_payload_setting_each_of_its_text_fields() -> None:
    assert {m.__name__ for m in MODELS} == set(VALID), "add a payload for each new input model"
    for model in MODELS:
        model.model_validate(VALID[model.__name__])
        missing = [f for f in _text_fields(model) if f not in VALID[model.__name__]]
        assert missing == [], f"{model.__name__}: set {missing} in VALID"


@pytest.mark.parametrize(("model", "field"), CASES, ids=[f"{m.__name__}.{f}" for m, f in CASES])
def test_control_bidi_and_surrogate_characters_are_refused_naming_the_field(
    model: type[StrictModel], field: str
) -> None:
    for label, char in REFUSED.items():
        payload = copy.deepcopy(VALID[model.__name__])
        payload[field] = _with(payload[field], char)
        if field in model.verbatim_fields and char != "\x00":
            model.model_validate(payload)  # carried byte for byte: only NUL is refused
            continue
        with pytest.raises(ValidationError) as caught:
            model.model_validate(payload)
        errors = caught.value.errors()
        assert [e["loc"][0] for e in errors] == [field], (label, errors)
        assert errors[0]["type"] == "text_hygiene", (label, errors)
        assert f"U+{ord(char):04X}" in errors[0]["msg"], (label, errors)


@pytest.mark.parametrize(("model", "field"), CASES, ids=[f"{m.__name__}.{f}" for m, f in CASES])
def test_zero_width_characters_are_removed_and_tab_cr_lf_kept(model: type[StrictModel], field: str) -> None:
    expected = model.model_validate(VALID[model.__name__])
    kept = field in model.verbatim_fields or field in model.zero_width_kept
    patterned = any(getattr(m, "pattern", None) for m in model.model_fields[field].metadata)
    whitespace = {} if patterned else {"tab": "\t", "LF": "\n", "CR": "\r"}  # a pattern may refuse them
    for label, char in {**ZERO_WIDTH, **whitespace}.items():
        payload = copy.deepcopy(VALID[model.__name__])
        payload[field] = _with(payload[field], char)
        got = model.model_validate(payload)
        if kept or char in "\t\n\r":
            assert getattr(got, field) == payload[field], label
        else:
            assert getattr(got, field) == getattr(expected, field), label


def test_a_document_keeps_its_zero_width_characters_so_its_hash_is_the_files() -> None:
    model = next(m for m in MODELS if m.__name__ == "DocumentIn")
    assert model.model_validate({"path": "a.md", "content": "\ufeffhi\u200b"}).model_dump()["content"] == "\ufeffhi\u200b"


def test_nested_errors_name_the_full_path_and_a_name_of_only_zero_width_is_refused() -> None:
    args = {"session_id": "s", "entities": [{"name": "A", "type": "x"}, {"name": "B\u202e", "type": "x"}]}
    with pytest.raises(InvalidArgument, match=r"entities\.1\.name: contains a bidirectional control \(U\+202E"):
        parse_args(WriteEpisodeInput, args)
    with pytest.raises(InvalidArgument, match=r"session_id: String should have at least 1 character"):
        parse_args(WriteEpisodeInput, {"session_id": "\u200b\u200d"})
