"""Find secrets in text, name their kind (never the value), and redact them.

Two families of checks run over every variant of the text (see normalise.py):
- token shapes that are secrets wherever they appear (kinds.py);
- assignments whose key names a secret (`DB_PASSWORD=…`, `"api_key": "…"`, `client_secret: …`).
  Prose about secrets ("the password policy requires 12 characters", "rotate the API key every
  90 days", "max_tokens = 4000") is not a secret, so the value must look like one: placeholders,
  environment references, numbers and ordinary words after a colon are let through.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from echo_memory.libs.core.secrets.kinds import KINDS, PLAIN_VALUE, looks_like_password
from echo_memory.libs.core.secrets.normalise import Variant, variants
from echo_memory.libs.core.secrets.prose import PROSE_PASSWORD, PROSE_TOKEN, prose_findings
from echo_memory.libs.core.secrets.rules import MAINTAINED, is_example

ASSIGNMENT_NOUN = "password or secret in an assignment"

# Any identifier followed by an assignment operator; whether the identifier names a secret
# (DB_PASSWORD, aws_secret_access_key, apiKey, auth-token …) is checked on the match, which keeps
# the scan linear on long documents.
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9:])(?P<key>[A-Za-z0-9_.\-]+)[\"']?\s*(?P<op>:=|=|:)\s*"
    r"(?P<quote>[\"'`]?)(?P<value>[^\s\"'`,;)}\]]+)"
)
# A key names a secret when one of its words (or two joined: api+key) ends in one of these.
_SECRET_WORDS = ("password", "passwd", "pwd", "passphrase", "secret", "apikey", "accesskey", "privatekey", "token")
_ASSIGNMENT_HINTS = ("pass", "pwd", "secret", "key", "token")
# Values that are clearly not a secret: references, placeholders, masked values, plain words.
_PLACEHOLDER = re.compile(r"^(?:[$<{%*\[]|x{4,}|\.\.\.|os\.|process\.env|env\.|getenv|settings\.|config\.)", re.I)
# A key ending in one of these names something about a secret, not the secret: token_id, secret_name.
_ABOUT_A_SECRET = frozenset(
    {"id", "ids", "name", "names", "path", "file", "url", "uri", "count", "length", "len", "min", "max", "ttl",
     "expiry", "expires", "type", "field", "policy", "version", "arn", "ref", "endpoint", "header", "prefix",
     "hint", "rotation", "manager", "dir", "size", "limit", "env", "var"}
)
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_KEYWORDS = frozenset(
    {"true", "false", "none", "null", "nil", "undefined", "required", "optional", "empty", "redacted",
     "hidden", "masked", "unset"}
)


@dataclass(frozen=True)
class Finding:
    """One secret: its kind and the [start, end) of the input that holds it."""

    noun: str
    phrase: str
    start: int
    end: int


def _names_a_secret(key: str) -> bool:
    """DB_PASSWORD, apiKey, client-secret, dbpassword: yes. tokenizer, secretary, token_id: no."""
    words = [w.lower() for w in _WORD.findall(key)]
    if not words or words[-1] in _ABOUT_A_SECRET:
        return False
    joined = words + [a + b for a, b in zip(words, words[1:], strict=False)]
    return any(word.endswith(_SECRET_WORDS) for word in joined)


def _looks_secret(value: str, *, key: str, op: str, quoted: bool) -> bool:
    if len(value) < 6 or _PLACEHOLDER.match(value) or value.lower() in _KEYWORDS or is_example(value):
        return False
    if value.isdigit():  # max_tokens=4000, token: 1200
        return False
    if "(" in value:  # code: password_hash = bcrypt(raw)
        return False
    if key.startswith("-"):
        # A command-line flag often names a resource (`--secret=db-pass`): only a chosen value counts.
        return looks_like_password(value) or len(value) >= 20
    if op in ("=", ":=") or quoted:
        return True  # code and config: `password = "hunter22"` is a secret whatever it looks like
    if PLAIN_VALUE.match(value):
        return False  # `token-service:v4.17.2-alpine`: an image tag, a version, a date
    # After a bare colon the text may be prose ("password: at least twelve characters"), so only
    # a value that is not an ordinary word counts: it mixes in digits or symbols, or is very long.
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    return has_digit or has_symbol or len(value) >= 20


def _assigns_a_secret(match: re.Match[str]) -> bool:
    return _names_a_secret(match["key"]) and _looks_secret(
        match["value"], key=match["key"], op=match["op"], quoted=bool(match["quote"]))


def _secret_span(match: re.Match[str]) -> tuple[int, int]:
    for name in ("secret", "id", "sig"):
        if name in match.re.groupindex and match.group(name) is not None:
            return match.span(name)
    return match.span()


_PROSE_PHRASE = {PROSE_PASSWORD: "a " + PROSE_PASSWORD, PROSE_TOKEN: "an " + PROSE_TOKEN}


def _in_variant(variant: Variant) -> Iterator[Finding]:
    """Shapes and assignments in one variant (prose rules run apart: see findings)."""
    lowered = variant.text.lower()
    # Our kinds first (they name the best-fitting kind), then the maintained rule set.
    for kind in KINDS + MAINTAINED:
        if not kind.may_match(lowered):
            continue
        for match in kind.pattern.finditer(variant.text):
            if kind.check is None or kind.check(match):
                span = _secret_span(match)
                if is_example(variant.text[span[0]:span[1]]):
                    continue  # AKIAIOSFODNN7EXAMPLE in a provider's docs is not a leak
                start, end = variant.span(*span)
                yield Finding(kind.noun, kind.phrase, start, end)
    if any(hint in lowered for hint in _ASSIGNMENT_HINTS):
        pos = 0
        while (assignment := _ASSIGNMENT.search(variant.text, pos)) is not None:
            if _assigns_a_secret(assignment):
                start, end = variant.span(*assignment.span("value"))
                yield Finding(ASSIGNMENT_NOUN, "a " + ASSIGNMENT_NOUN, start, end)
                pos = assignment.end()
            else:
                # ".env: JWT_SECRET=…": the value of a key that names no secret may hold an assignment
                pos = assignment.start("value")


def findings(text: str) -> Iterator[Finding]:
    """Every secret in `text`, in every variant, in kind order per variant (may repeat a span)."""
    every = list(variants(text))
    for variant in every:
        yield from _in_variant(variant)
    # Last, so a refusal names a provider's kind or an assignment when one also matches, in any variant.
    for variant in every:
        for found in prose_findings(variant.text):
            start, end = variant.span(found.start, found.end)
            yield Finding(found.noun, _PROSE_PHRASE[found.noun], start, end)


def find_secret(text: str) -> str | None:
    """The kind of the first secret in `text` ("an AWS access key", …), or None when it has none.

    Kinds are tried from most to least specific, so the answer names the best-fitting kind.
    """
    for finding in findings(text):
        return finding.phrase
    return None


def redact_secrets(text: str) -> str:
    """`text` with each secret replaced by `[redacted <kind>]`; `text` itself when it holds none.

    Overlapping findings merge into one redaction named by the earliest, most specific one.
    """
    ranked: dict[tuple[int, int], tuple[int, str]] = {}
    for rank, f in enumerate(findings(text)):
        if f.end > f.start:
            ranked.setdefault((f.start, f.end), (rank, f.noun))
    found = sorted((start, -end, rank, noun) for (start, end), (rank, noun) in ranked.items())
    if not found:
        return text
    out: list[str] = []
    cursor = 0
    for start, neg_end, _rank, noun in found:
        end = -neg_end
        if start < cursor:  # inside (or overlapping) the previous redaction
            if end > cursor:
                cursor = end
            continue
        out.append(text[cursor:start])
        out.append(f"[redacted {noun}]")
        cursor = end
    out.append(text[cursor:])
    return "".join(out)
