"""The detector against the labelled corpus: recall and false-positive rate meet the product bar."""

from __future__ import annotations

from echo_memory.libs.core.secrets import find_secret, findings
from tests.writes.secret_corpus import NON_SECRETS, SECRETS

MIN_RECALL = 0.97
MAX_FALSE_POSITIVES = 0.02


def test_the_corpus_is_big_enough_to_measure() -> None:
    assert len(SECRETS) >= 150 and len(NON_SECRETS) >= 150
    assert len({text for text, _ in SECRETS}) == len(SECRETS)


def test_recall_and_false_positive_rate_meet_the_bar() -> None:
    missed = [(kind, text) for text, kind in SECRETS if find_secret(text) is None]
    flagged = [(find_secret(text), text) for text in NON_SECRETS if find_secret(text) is not None]
    recall = 1 - len(missed) / len(SECRETS)
    false_positives = len(flagged) / len(NON_SECRETS)
    print(f"\nsecret corpus: recall {recall:.3f} ({len(SECRETS)} secrets), "
          f"false positives {false_positives:.3f} ({len(NON_SECRETS)} look-alikes)")
    assert recall >= MIN_RECALL, missed
    assert false_positives <= MAX_FALSE_POSITIVES, flagged


def test_each_secret_is_named_by_its_own_kind() -> None:
    wrong = [(kind, next(findings(text)).noun, text) for text, kind in SECRETS
             if find_secret(text) is not None and next(findings(text)).noun != kind]
    assert wrong == []
