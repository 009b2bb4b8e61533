"""The checks a digest abstract must pass before it is stored: pure text rules, no database, no model.

An abstract is a few sentences a model wrote about a digest, each citing member facts. It is
stored only when every sentence cites at least one current member of the digest version it is
for, and every number, date and proper name in a sentence occurs in one of the facts that
sentence cites; a secret or an instruction addressed to the reader refuses it too. Names are
capitalised words not at a sentence's start, and identifiers anywhere (a digit, `_`, an inner
`.`/`/`/`@`/`:`, two capitals: `v2`, `billing_api`, `api.example.com`, `TLS`, `PostgreSQL`).
Numbers may be written as digits or as words (`three` is found as `3` and the other way round);
a four-digit year counts as a date. Matching ignores case for words and is whole-word.

These rules are deliberately stricter than what a reader would need: an abstract that paraphrases
correctly but names something its cited facts do not is refused, never stored half-checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from echo_memory.libs.core.contracts.consolidation import MAX_ABSTRACT_CHARS, AbstractProblem, AbstractProblemReason
from echo_memory.libs.core.hygiene.instructions import is_instruction_like
from echo_memory.libs.core.secrets import find_secret

# A word with the punctuation inside it that joins identifiers, numbers and dates ("v1.2", "1,000",
# "14:00", "2026-03-01", "api.example.com"); punctuation not followed by a word character ends it.
_TOKEN = re.compile(r"\w(?:[\w'’]|[.,:/@+-](?=\w))*")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_ISO_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}(?:T[\d:]+)?|\d{1,2}/\d{1,2}/\d{2,4}")
_YEAR = re.compile(r"(?:19|20)\d\d")
_OPENERS = "\"'“‘([{*-–— \t\n"
MONTHS = frozenset({"january", "february", "march", "april", "may", "june", "july", "august", "september",
                    "october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
                    "sept", "oct", "nov", "dec"})
WEEKDAYS = frozenset({"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"})
RELATIVE_DAYS = frozenset({"today", "tomorrow", "yesterday", "tonight"})
NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
                "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
                "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40,
                "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
                "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000, "dozen": 12, "twice": 2,
                "thrice": 3}


@dataclass(frozen=True)
class Claim:
    """A token of a sentence that must occur in a cited fact."""

    kind: AbstractProblemReason  # unsupported_number | unsupported_date | unsupported_name
    token: str


@dataclass(frozen=True)
class Member:
    """A member fact of the digest version, as the check needs it."""

    text: str
    current: bool


def _sentence_start(text: str, start: int) -> bool:
    """True when the token at `start` opens the text or follows a sentence's end (., ! or ?)."""
    before = text[:start].rstrip(_OPENERS)
    return not before or before[-1] in ".!?"


def _classify(token: str, at_start: bool) -> AbstractProblemReason | None:
    word = re.sub(r"['’]s$", "", token)
    lower = word.lower()
    if _ISO_DATE.fullmatch(word) or _YEAR.fullmatch(word):
        return "unsupported_date"
    if _NUMBER.fullmatch(word) or lower in NUMBER_WORDS:
        return "unsupported_number"
    if lower in RELATIVE_DAYS or (word[0].isupper() and (lower in WEEKDAYS or lower in MONTHS)
                                  and not (at_start and lower == "may")):
        return "unsupported_date"
    inner_caps = sum(c.isupper() for c in word) >= 2 or re.search(r"[a-z][A-Z]", word) is not None
    if any(c.isdigit() for c in word) or "_" in word or re.search(r"[./@:+]", word) or inner_caps:
        return "unsupported_name"
    if word[0].isupper() and not at_start and len(word) > 1:
        return "unsupported_name"
    return None


def claims(sentence: str) -> Iterator[Claim]:
    """Every number, date and name of `sentence` that a cited fact must hold, in order."""
    for match in _TOKEN.finditer(sentence):
        kind = _classify(match.group(), _sentence_start(sentence, match.start()))
        if kind is not None:
            yield Claim(kind, re.sub(r"['’]s$", "", match.group()))


def _numbers_in(text: str) -> set[str]:
    """Every number a text states, as digits: its digit runs and its number words."""
    found = {m.group() for m in _NUMBER.finditer(text)}
    found |= {str(NUMBER_WORDS[w]) for w in re.findall(r"[a-z]+", text.lower()) if w in NUMBER_WORDS}
    return found


def _has_word(text: str, token: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(token)}(?!\w)", text, re.IGNORECASE) is not None


def supported(claim: Claim, texts: Sequence[str]) -> bool:
    """True when one of `texts` (the facts a sentence cites) holds the claim."""
    if claim.kind == "unsupported_number":
        value = str(NUMBER_WORDS.get(claim.token.lower(), claim.token))
        return any(value in _numbers_in(t) for t in texts)
    if any(_has_word(t, claim.token) for t in texts):
        return True
    # "Stripe-based", "Billing/Payments": each part that is itself a claim must occur.
    parts = [p for p in re.split(r"[-/]", claim.token) if p and p != claim.token]
    part_claims = [Claim(claim.kind, p) for p in parts if _classify(p, at_start=False) is not None]
    return bool(part_claims) and all(supported(c, texts) for c in part_claims)


def check_abstract(sentences: Sequence[tuple[str, Sequence[str]]], members: Mapping[str, Member]) -> list[AbstractProblem]:
    """Every problem that keeps the abstract from being stored; empty when it may be stored.

    `sentences` are (text, cited fact ids) in order; `members` the digest version's member facts by id.
    """
    problems: list[AbstractProblem] = []
    total = sum(len(text) for text, _ in sentences) + max(len(sentences) - 1, 0)
    if total > MAX_ABSTRACT_CHARS:
        problems.append(AbstractProblem(sentence=0, reason="too_long",
                                        detail=f"{total} characters; at most {MAX_ABSTRACT_CHARS}"))
    for number, (text, cites) in enumerate(sentences, start=1):
        def problem(reason: AbstractProblemReason, detail: str, n: int = number) -> None:
            problems.append(AbstractProblem(sentence=n, reason=reason, detail=detail))

        cited = list(dict.fromkeys(cites))
        if not cited:
            problem("no_citation", "cites no member fact")
        outside = [c for c in cited if c not in members]
        ended = [c for c in cited if c in members and not members[c].current]
        if outside:
            problem("not_a_member", f"cites {', '.join(outside)}, not a member of this digest version")
        if ended:
            problem("fact_not_current", f"cites {', '.join(ended)}, no longer current")
        if find_secret(text):  # its tokens are not quoted back: one of them is the secret
            problem("secret", "holds what the secret detector takes for a credential")
            continue
        if is_instruction_like(text):
            problem("instruction_like", "addresses the reader as an instruction")
        texts = [members[c].text for c in cited if c in members and members[c].current]
        missing: dict[AbstractProblemReason, list[str]] = {}
        for claim in claims(text):
            if not supported(claim, texts) and claim.token not in missing.get(claim.kind, []):
                missing.setdefault(claim.kind, []).append(claim.token)
        for reason, tokens in missing.items():
            quoted = ", ".join(f"'{t}'" for t in tokens)
            problem(reason, f"{quoted} occurs in none of the facts it cites")
    return problems
