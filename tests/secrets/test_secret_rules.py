"""The secret filter against the generated corpus: the bar holds, per kind and overall, on the
corpus's seed and on seeds it was not tuned on; the maintained rule set is in use; redaction keeps
the sentence and removes the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from echo_memory.libs.core.secrets import find_secret, findings, redact_secrets
from echo_memory.libs.core.secrets.kinds import KINDS
from echo_memory.libs.core.secrets.rules import MAINTAINED, PLUGINS
from tests.secrets.corpus import LOOKALIKES, SECRETS, SEED, build, password
from tests.secrets.heldout import SECRET_PHRASINGS
from tests.secrets.report import MAX_FALSE_POSITIVES, MIN_KIND_RECALL, MIN_RECALL, held_out, measure, table


def test_the_corpus_is_big_and_varied_enough_to_measure() -> None:
    kinds = {s.kind for s in SECRETS}
    prose = [s for s in SECRETS if s.kind.startswith("prose") or s.kind.endswith("in prose")]
    languages = {s.kind for s in prose if "(" in s.kind}
    assert len(SECRETS) >= 300 and len(kinds) >= 40
    assert len(prose) * 3 >= len(SECRETS), (len(prose), len(SECRETS))
    assert {"German", "French", "Spanish", "Chinese", "Japanese", "English"} <= {k.split("(")[1].rstrip(")") for k in languages}
    assert len(LOOKALIKES) >= 300
    assert {"git SHA", "UUID", "content hash in a log", "version string", "base64 of ordinary text",
            "documented example key", "long identifier", "URL without credentials",
            "sentence about passwords"} <= {s.kind for s in LOOKALIKES}
    assert len({s.text for s in SECRETS}) == len(SECRETS)
    assert all(s.secret for s in SECRETS) and not any(s.secret for s in LOOKALIKES)


def test_the_corpus_is_generated_the_same_way_every_time() -> None:
    again = build(SEED)
    assert again == (SECRETS, LOOKALIKES)
    other = build(SEED + 1)
    assert [s.text for s in other[0]] != [s.text for s in SECRETS]
    build(SEED)  # leave the module's generator where the import left it


def test_the_repository_holds_no_literal_secret_of_the_corpus() -> None:
    """Values are generated at test time: no line of the generator holds a token shape a repository
    scanner (detect-secrets' plugins, our provider kinds) would flag."""
    source = (Path(__file__).parent / "corpus.py").read_text()
    flagged = [(kind.noun, line) for line in source.splitlines() for kind in KINDS + MAINTAINED
               for match in kind.pattern.finditer(line) if kind.check is None or kind.check(match)]
    assert flagged == []


@pytest.mark.parametrize("seed", [SEED, 1, 2, 3])
def test_recall_and_false_positives_meet_the_bar(seed: int) -> None:
    report = measure(seed)
    print(f"\nseed {seed}\n" + table(report))
    assert report.recall >= MIN_RECALL
    assert report.false_positives <= MAX_FALSE_POSITIVES, [r.wrong for r in report.lookalikes if r.wrong]
    below = [(r.kind, r.rate, r.wrong) for r in report.secrets if r.rate < MIN_KIND_RECALL]
    assert below == []
    assert report.failures() == []


def test_the_maintained_rule_set_is_in_use() -> None:
    """Kinds only detect-secrets' plugins know are caught and named by the plugin."""
    assert len(PLUGINS) >= 20 and len(MAINTAINED) >= len(PLUGINS)
    square = "sq0" + "csp-" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9f"
    discord = "M" + "TIzNDU2Nzg5MDEyMzQ1Njc4OTAx" + ".Gh7kLm" + ".aB3dE5fG7hJ9kL1mN3pQ5rS7tU9"
    assert find_secret(f"the pos app uses {square}") == "a Square OAuth Secret"
    assert find_secret(f"bot: {discord}") == "a Discord Bot Token"


@pytest.mark.parametrize("text", [
    "log in to staging with password {p}", "the staging DB password, {p}, rotates monthly",
    "staging login: admin / {p}", "Das Passwort für den Staging-Server ist {p}.",
    "Le mot de passe du serveur est {p}.", "La contraseña del servidor es {p}.", "测试服务器的密码是{p}，每月更换。",
    "ステージングのパスワードは{p}です。",
])
def test_a_password_in_a_sentence_is_redacted_and_the_sentence_kept(text: str) -> None:
    value = password()
    sentence = text.format(p=value)
    redacted = redact_secrets(sentence)
    assert value not in redacted and "[redacted password in prose]" in redacted
    assert redacted.startswith(sentence.split(value)[0] + "[redacted password in prose]")
    assert next(findings(sentence)).noun == "password in prose"


@pytest.mark.parametrize("text", [
    "rotate the password monthly", "the password policy requires 12 characters",
    "Das Passwort muss alle 90 Tage geändert werden.", "La contraseña debe tener al menos 12 caracteres.",
    "密码必须至少包含12个字符。", "パスワードは12文字以上にしてください。",
    "Set AWS_ACCESS_KEY_ID to " + "AKIA" + "IOSFODNN7" + "EXAMPLE" + " as in the AWS docs",
])
def test_sentences_about_passwords_and_documented_examples_pass(text: str) -> None:
    assert find_secret(text) is None and redact_secrets(text) == text


def test_redacted_text_is_clean_when_checked_again() -> None:
    """Imports and capture hooks redact, then the writes service checks again: nothing may remain."""
    left = [(s.kind, redact_secrets(s.text)) for s in SECRETS if find_secret(redact_secrets(s.text)) is not None]
    assert left == []
    assert all(redact_secrets(s.text) != s.text for s in SECRETS)


def test_held_out_phrasings_do_not_regress() -> None:
    """A floor, not the bar: wording the rules were not fitted to (measured 15 of 20 when written)."""
    missed, flagged = held_out()
    assert flagged == []
    assert len(SECRET_PHRASINGS) - len(missed) >= 15, missed


def test_the_hints_that_let_a_rule_skip_a_text_never_hide_a_match() -> None:
    """A maintained rule is skipped when its hint is absent: every text it matches holds the hint."""
    texts = [s.text for s in SECRETS + LOOKALIKES]
    hidden = [(kind.noun, text) for kind in MAINTAINED for text in texts
              if kind.pattern.search(text) and not kind.may_match(text.lower())]
    assert hidden == []
