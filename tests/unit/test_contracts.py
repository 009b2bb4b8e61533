"""Contracts: subjects, tokens and error round trips."""

from __future__ import annotations

import pytest

from echo_memory.libs.core.contracts import errors
from echo_memory.libs.core.contracts.subjects import SERVICES, request_subject, subscribe_pattern
from echo_memory.libs.core.contracts.tokens import hash_token, mint, org_of
from echo_memory.libs.core.contracts.verbs import VERBS


def test_subjects_are_versioned_and_carry_the_org() -> None:
    assert request_subject("acme", "writes", "write_episode") == "echo.v1.acme.writes.write_episode"
    assert subscribe_pattern("retrieval", "query_memory") == "echo.v1.{org}.retrieval.query_memory"


@pytest.mark.parametrize("org", ["", "Acme", "a.b", "a*", "a>", "a b", "-x"])
def test_org_names_that_would_break_a_subject_are_refused(org: str) -> None:
    with pytest.raises(ValueError):
        request_subject(org, "writes", "write_episode")


def test_the_subject_table_is_the_verb_table() -> None:
    assert sum(len(verbs) for verbs in SERVICES.values()) == len(VERBS)
    assert len({(v.service, v.name) for v in VERBS}) == len(VERBS)
    for v in VERBS:
        assert request_subject("acme", v.service, v.name) == f"echo.v1.acme.{v.service}.{v.name}"
    with pytest.raises(ValueError):
        request_subject("acme", "writes", "query_memory")  # a verb of another service


def test_tokens_name_their_org_and_are_stored_only_as_a_hash() -> None:
    token = mint("acme-eu")
    assert org_of(token) == "acme-eu"
    assert token not in hash_token(token) and len(hash_token(token)) == 64
    assert org_of("sk-not-ours") is None and org_of("em_acme") is None


@pytest.mark.parametrize("cls", [errors.Conflict, errors.Unavailable, errors.BusTimeout, errors.RateLimited])
def test_retryable_errors_survive_the_bus_round_trip(cls: type[errors.EchoError]) -> None:
    rebuilt = errors.from_info(cls("boom", retry_after=2.0).to_info())
    assert type(rebuilt) is cls and rebuilt.retryable and rebuilt.retry_after == 2.0


def test_unknown_error_codes_become_internal_not_success() -> None:
    info = errors.ErrorInfo(code="made_up", message="m", retryable=False)
    assert isinstance(errors.from_info(info), errors.Internal)
