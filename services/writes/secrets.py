"""Secrets are never stored: spot the common kinds and name the kind (never the value) in the refusal.

Two families of checks:
- token shapes that are secrets wherever they appear (private key blocks, cloud and SaaS keys,
  JWTs, bearer tokens, passwords inside connection strings);
- assignments whose key names a secret (`DB_PASSWORD=…`, `"api_key": "…"`, `client_secret: …`).
  Prose about secrets ("the password policy requires 12 characters", "rotate the API key every
  90 days", "max_tokens = 4000") is not a secret, so the value must look like one: placeholders,
  environment references, numbers and ordinary words after a colon are let through.

Called by the writes service on every string it would store; see tests/writes/test_secrets.py for
each kind and for the prose that must pass.
"""

from __future__ import annotations

import re

# Ordered from most to least specific, so the message names the best-fitting kind.
_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a private key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("a Slack token", re.compile(r"\bxox[abprse]-[A-Za-z0-9-]{10,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    ("a Stripe key", re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("an API key", re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{20,}")),
    ("an Echo Memory token", re.compile(r"\bem_[a-z0-9-]+_[A-Za-z0-9_\-]{30,}")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    ("a bearer token", re.compile(r"(?i)\bbearer\s+(?![<$%{])[A-Za-z0-9._~+/\-]{20,}=*")),
    (
        "a password in a connection string",
        re.compile(r"\b[a-z][a-z0-9+.\-]*://[^/\s:@]+:(?![<$%{*])[^/\s@]{3,}@"),
    ),
)

# An identifier that names a secret: DB_PASSWORD, aws_secret_access_key, apiKey, auth-token …
_SECRET_KEY = (
    r"[A-Za-z0-9_.\-]*(?:password|passwd|pwd|passphrase|secret|api[_\-]?key|access[_\-]?key|"
    r"private[_\-]?key|auth[_\-]?token|access[_\-]?token|refresh[_\-]?token|session[_\-]?token|token)"
    r"[A-Za-z0-9_.\-]*"
)
_ASSIGNMENT = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?P<key>" + _SECRET_KEY + r")[\"']?\s*(?P<op>:=|=|:)\s*"
    r"(?P<quote>[\"'`]?)(?P<value>[^\s\"'`,;)}\]]+)"
)
# Values that are clearly not a secret: references, placeholders, masked values, plain words.
_PLACEHOLDER = re.compile(r"^(?:[$<{%*]|x{4,}|\.\.\.|os\.|process\.env|env\.|getenv|settings\.|config\.)", re.I)
_KEYWORDS = frozenset(
    {"true", "false", "none", "null", "nil", "undefined", "required", "optional", "empty", "redacted",
     "hidden", "masked", "unset"}
)


def _looks_secret(value: str, *, op: str, quoted: bool) -> bool:
    if len(value) < 6 or _PLACEHOLDER.match(value) or value.lower() in _KEYWORDS:
        return False
    if value.isdigit():  # max_tokens=4000, token: 1200
        return False
    if "(" in value:  # code: password_hash = bcrypt(raw)
        return False
    if op in ("=", ":=") or quoted:
        return True  # code and config: `password = "hunter22"` is a secret whatever it looks like
    # After a bare colon the text may be prose ("password: at least twelve characters"), so only
    # a value that is not an ordinary word counts: it mixes in digits or symbols, or is very long.
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    return has_digit or has_symbol or len(value) >= 20


def find_secret(text: str) -> str | None:
    """The kind of secret `text` contains ("an AWS access key", …), or None when it has none."""
    for kind, pattern in _SHAPES:
        if pattern.search(text):
            return kind
    for match in _ASSIGNMENT.finditer(text):
        if _looks_secret(match["value"], op=match["op"], quoted=bool(match["quote"])):
            return "a password or secret in an assignment"
    return None
